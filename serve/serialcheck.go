package serve

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

// Serial continuity with the secondaries. Serials run ahead of the clock
// when cns commits more than once a second; a db that is lost (recreated
// empty) or restored from an older backup then starts below what the
// secondaries hold, and every RFC 1982 secondary ignores it until the
// clock catches up. So, on start and for every zone cns creates, the
// secondaries (NOTIFY targets and the peers that transferred the zone)
// are asked for their SOA before the zone's first NOTIFY, and the zone
// continues above the highest serial any of them holds. Where the db
// cannot vouch for its serials (created empty, restored: db.
// SerialsUnverified) or the zone is new, a peer at the very same serial
// counts as ahead too, since cns's version of that serial may differ from
// the peer's. A peer that does not answer holds nothing up: the zone is
// announced after the first round, and the peer is asked again with
// backoff, and whenever propagation tracking sees it ahead.
//
// In such a zone a peer's serial may also be one cns's own journal starts
// from, in cns's version: a db created empty or restored numbers its
// commits from the clock or the backup, and can pass through serials the
// lost file gave the peer. No IXFR starts from it then (db.
// ForgetJournalFrom): the peer gets the whole zone. An empty db stays
// unverified until it holds zones and they have been checked, so that a
// crash or a power cut between a first load's commits and their check
// does not leave a file that vouches for serials nobody compared.

// Serial check timing.
const (
	// serialCheckTimeout bounds how long a silent peer holds up a zone's
	// first NOTIFY; a secondary on the same network answers in
	// milliseconds, and a slow one is asked again in the next round.
	serialCheckTimeout  = time.Second
	serialCheckFirstGap = time.Second
	serialCheckMaxGap   = 5 * time.Minute
	serialCheckParallel = 16
)

type serialCheck struct {
	s *Server

	mu         sync.Mutex
	zones      map[string]*zoneCheck
	unverified string // why the db's serials are not trusted; "" when they are
	wake       chan struct{}
	since      time.Time // this run's start: transfers after it came from this run
}

// zoneCheck is one zone's progress.
type zoneCheck struct {
	untrusted bool // a peer at cns's serial is ahead as well
	held      bool // NOTIFYs wait for the first round
	answered  map[netip.AddrPort]bool
	// ahead are serials propagation tracking saw peers hold past cns's.
	ahead map[netip.AddrPort]uint32
}

func newSerialCheck(s *Server, zones []db.ZoneInfo) *serialCheck {
	c := &serialCheck{s: s, zones: map[string]*zoneCheck{}, wake: make(chan struct{}, 1), since: time.Now()}
	why, err := s.store.SerialsUnverified()
	if err != nil {
		s.log.Warn("serial trust unreadable; treating the serials as unverified", "err", err)
		why = "unreadable"
	}
	c.unverified = why
	for _, zi := range zones {
		c.zones[zi.Name] = &zoneCheck{untrusted: why != "", held: true}
	}
	return c
}

// commit notes the zones a commit created or removed. It runs in the
// commit hook, before the NOTIFYs are queued.
func (c *serialCheck) commit(cm *db.Committed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	created := false
	for _, zu := range cm.Zones {
		switch {
		case zu.Removed:
			delete(c.zones, zu.Zone)
		case zu.Entry == nil: // a new zone
			c.zones[zu.Zone] = &zoneCheck{untrusted: true, held: true}
			created = true
		}
	}
	if created {
		c.poke()
	}
}

// vouchesFor reports whether an IXFR to peer may start from cns's journal
// of zone: always, unless the zone is still being checked (the db cannot
// vouch for its serials, or the zone is new) and peer has not answered
// yet. Its serial may then be one the journal reused (settle); it gets
// the whole zone.
func (c *serialCheck) vouchesFor(zone string, peer netip.Addr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	zc := c.zones[zone]
	if zc == nil || !zc.untrusted {
		return true
	}
	return zc.heard(peer)
}

// heard reports whether peer answered the check of the zone.
func (zc *zoneCheck) heard(peer netip.Addr) bool {
	for to := range zc.answered {
		if to.Addr().Unmap() == peer.Unmap() {
			return true
		}
	}
	return false
}

// transferred is told of every transfer peer took of zone: a peer the
// check of the zone has not heard yet is up, so it is asked now rather
// than at the next backoff. Called once the transfer is recorded, so
// that the serial it answers counts as this run's (peerSerial.ours).
func (c *serialCheck) transferred(zone string, peer netip.Addr) {
	c.mu.Lock()
	zc := c.zones[zone]
	ask := zc != nil && zc.untrusted && !zc.heard(peer)
	c.mu.Unlock()
	if ask {
		c.poke()
	}
}

// holds reports whether zone's NOTIFYs wait for its first check.
func (c *serialCheck) holds(zone string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	zc := c.zones[zone]
	return zc != nil && zc.held
}

// peerAhead is called by propagation tracking for every serial a peer is
// seen to serve. When it is past cns's, it returns the reason to show
// and has the zone checked again.
func (c *serialCheck) peerAhead(zone string, target netip.AddrPort, serial uint32) string {
	cur, ok := c.s.ZoneSerial(zone)
	if !ok || !db.SerialLess(cur, serial) {
		return ""
	}
	c.mu.Lock()
	zc := c.zones[zone]
	if zc == nil {
		zc = &zoneCheck{}
		c.zones[zone] = zc
	}
	if zc.ahead == nil {
		zc.ahead = map[netip.AddrPort]uint32{}
	}
	zc.ahead[target] = serial
	c.mu.Unlock()
	c.poke()
	return fmt.Sprintf("peer holds serial %d, ahead of cns's %d (RFC 1982): it ignores cns until cns passes it", serial, cur)
}

func (c *serialCheck) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// run checks zones until ctx ends: at once, then again with backoff while
// some peer has not answered, and whenever a zone is created or a peer is
// seen ahead.
func (c *serialCheck) run(ctx context.Context) {
	gap := serialCheckFirstGap
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
			gap = serialCheckFirstGap
		case <-t.C:
		}
		if c.round(ctx) {
			t.Stop()
			continue
		}
		t.Reset(gap)
		gap = min(2*gap, serialCheckMaxGap)
	}
}

// peerSerial is one peer's answer.
type peerSerial struct {
	zone   string
	target netip.AddrPort
	serial uint32
	has    bool // false: the peer answered without the zone
	// ours: the peer transferred the zone from this run, so a serial
	// equal to cns's is cns's own version of it.
	ours bool
}

// round asks every peer that has not answered yet for each zone still
// being checked, moves zones past the highest serial found, announces the
// held ones, and reports whether every check is complete.
func (c *serialCheck) round(ctx context.Context) bool {
	acc := c.s.access.Load()
	type job struct {
		zone   string
		target netip.AddrPort
	}
	var jobs []job
	c.mu.Lock()
	names := slices.Sorted(maps.Keys(c.zones))
	for _, zone := range names {
		zc := c.zones[zone]
		for _, to := range c.s.expectedTargets(acc, zone) {
			if !zc.answered[to] {
				jobs = append(jobs, job{zone, to})
			}
		}
	}
	c.mu.Unlock()

	answers := make(chan peerSerial, len(jobs))
	sem := make(chan struct{}, serialCheckParallel)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if serial, has, ok := askSOA(ctx, j.target, j.zone); ok {
				ours := has && c.s.peers.transferredSince(j.target.Addr(), j.zone, c.since)
				if ours {
					// It holds what it transferred from this run; a signer
					// answers a serial of its own, and this is the one of
					// cns's it serves (signers.go).
					serial, _ = c.s.peers.observeSOA(j.target.Addr(), j.zone, serial, time.Now())
				}
				answers <- peerSerial{j.zone, j.target, serial, has, ours}
			}
		})
	}
	wg.Wait()
	close(answers)
	if ctx.Err() != nil {
		return false
	}
	return c.settle(acc, names, answers)
}

// settle acts on a round's answers.
func (c *serialCheck) settle(acc *access, names []string, answers <-chan peerSerial) bool {
	highest := map[string]peerSerial{}
	note := func(a peerSerial) {
		if h, ok := highest[a.zone]; !ok || db.SerialLess(h.serial, a.serial) {
			highest[a.zone] = a
		}
	}
	var got []peerSerial
	heard := map[string]map[netip.AddrPort]bool{} // zone → peers that answered this round
	for a := range answers {
		got = append(got, a)
		if heard[a.zone] == nil {
			heard[a.zone] = map[netip.AddrPort]bool{}
		}
		heard[a.zone][a.target] = true
		if a.has {
			note(a)
		}
	}
	type raise struct {
		peerSerial
		cur       uint32
		untrusted bool
	}
	var raises []raise
	var release, trusted []string
	complete := true
	c.mu.Lock()
	for _, zone := range names {
		zc := c.zones[zone]
		if zc == nil {
			continue
		}
		for to, serial := range zc.ahead {
			note(peerSerial{zone, to, serial, true, false})
		}
		zc.ahead = nil
		cur, ok := c.s.ZoneSerial(zone)
		h, answered := highest[zone]
		switch {
		case ok && answered && (db.SerialLess(cur, h.serial) || (zc.untrusted && !h.ours && h.serial == cur)):
			raises = append(raises, raise{h, cur, zc.untrusted})
		case zc.held:
			release = append(release, zone)
		}
		zc.held = false
		done := true
		for _, to := range c.s.expectedTargets(acc, zone) {
			done = done && (zc.answered[to] || heard[zone][to])
		}
		if done {
			trusted = append(trusted, zone)
		}
		complete = complete && done
	}
	verified := c.unverified != "" && complete && len(names) > 0
	why := c.unverified
	if verified {
		c.unverified = ""
	}
	c.mu.Unlock()

	// The answers count (vouchesFor) only once the journal forgot the
	// serials they name in a version cns cannot vouch for: those it
	// starts from now, and those the raises make it start from.
	c.forgetReused(got)
	for _, r := range raises {
		c.s.log.Warn("a secondary holds a serial at or past the db's; continuing above it", "zone", r.zone,
			"peer", r.target.String(), "peer_serial", r.serial, "serial", r.cur, "db_unverified", r.untrusted)
		cm, err := c.s.store.RaiseSerial(r.zone, r.serial, fmt.Sprintf("serial check: %s holds %d", r.target, r.serial))
		if err != nil {
			c.s.log.Error("cannot move the serial past the secondary's; changes do not reach it", "zone", r.zone, "peer", r.target.String(), "err", err)
		}
		if err != nil || len(cm.Zones) == 0 {
			release = append(release, r.zone)
		}
	}
	if len(raises) > 0 {
		c.forgetReused(got)
	}
	c.admit(heard, trusted, release)
	if verified {
		if err := c.s.store.MarkSerialsVerified(); err != nil {
			c.s.log.Warn("cannot record that the serials are verified", "err", err)
		} else {
			c.s.log.Info("every secondary answered: serials verified", "was", why)
		}
	}
	return complete
}

// admit records the peers a round heard and the zones it found trusted,
// once the journal has forgotten the serials they named (settle), and
// announces the zones released.
func (c *serialCheck) admit(heard map[string]map[netip.AddrPort]bool, trusted, release []string) {
	c.mu.Lock()
	for zone, peers := range heard {
		if zc := c.zones[zone]; zc != nil {
			if zc.answered == nil {
				zc.answered = map[netip.AddrPort]bool{}
			}
			maps.Copy(zc.answered, peers)
		}
	}
	for _, zone := range trusted {
		if zc := c.zones[zone]; zc != nil {
			zc.untrusted = false
		}
	}
	c.mu.Unlock()
	for _, zone := range release {
		if cur, ok := c.s.ZoneSerial(zone); ok {
			c.s.notify.release(zone, cur)
		}
	}
}

// forgetReused has the journal of each zone still being checked forget
// the serials peers answered (db.ForgetJournalFrom): in a db that cannot
// vouch for its serials, or a zone new to it, the peer's version of the
// zone at that serial may not be the one the journal starts from.
func (c *serialCheck) forgetReused(answers []peerSerial) {
	var reused []peerSerial
	c.mu.Lock()
	for _, a := range answers {
		if zc := c.zones[a.zone]; zc != nil && zc.untrusted && a.has && !a.ours {
			reused = append(reused, a)
		}
	}
	c.mu.Unlock()
	for _, a := range reused {
		if ok, err := c.s.store.ForgetJournalFrom(a.zone, a.serial); err != nil {
			c.s.log.Warn("cannot drop the journal from a secondary's serial; an IXFR from it may start from cns's version of it", "zone", a.zone, "peer", a.target.String(), "serial", a.serial, "err", err)
		} else if ok {
			c.s.log.Info("a secondary holds a serial the journal starts from, in a version cns cannot vouch for; it gets the whole zone", "zone", a.zone, "peer", a.target.String(), "serial", a.serial)
		}
	}
}

// transferredSince reports whether addr transferred zone after t.
func (t *peerTracker) transferredSince(addr netip.Addr, zone string, since time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[addr.Unmap()]
	return p != nil && p.Zones[zone] != nil && p.Zones[zone].LastTransfer.After(since)
}

// askSOA asks target for zone's serial. has is false when the peer
// answered without one (it does not hold the zone yet); ok is false when
// it did not answer.
func askSOA(ctx context.Context, target netip.AddrPort, zone string) (serial uint32, has, ok bool) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(zone), dns.TypeSOA)
	cl := &dns.Client{Timeout: serialCheckTimeout}
	r, _, err := cl.ExchangeContext(ctx, m, target.String())
	if err != nil {
		return 0, false, false
	}
	for _, rr := range r.Answer {
		if soa, isSOA := rr.(*dns.SOA); isSOA && r.Rcode == dns.RcodeSuccess {
			return soa.Serial, true, true
		}
	}
	return 0, false, true
}
