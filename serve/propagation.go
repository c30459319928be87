package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin/metrics"
	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/serve/policy"
)

// Propagation tracking (after OpenStack Designate's pool manager): for
// every serial of every zone, when each secondary serves it. After a
// commit, each peer's SOA is polled until it serves the serial; the
// serial goes PENDING → ACTIVE once enough peers do, or ERROR when the
// retries run out. A periodic sync NOTIFYs peers that lag.

// normalPropagation is p with cns's defaults where it leaves them zero.
func normalPropagation(p policy.Propagation) policy.Propagation {
	if p.ThresholdPercent <= 0 || p.ThresholdPercent > 100 {
		p.ThresholdPercent = 100
	}
	if p.PollDelay <= 0 {
		p.PollDelay = 50 * time.Millisecond
	}
	if p.PollInterval <= 0 {
		p.PollInterval = 200 * time.Millisecond
	}
	if p.PollTimeout <= 0 {
		p.PollTimeout = 2 * time.Second
	}
	if p.PollMaxRetries <= 0 {
		p.PollMaxRetries = 20
	}
	if p.PeriodicSync <= 0 {
		p.PeriodicSync = time.Minute
	}
	return p
}

// keptSerials is how many serials of a zone are remembered.
const keptSerials = 20

// propagation tracks every zone's recent serials.
type propagation struct {
	s      *Server
	policy policy.Propagation

	mu     sync.Mutex
	zones  map[string][]*status.Propagation // newest last
	dirty  map[string]bool
	change chan struct{}
	wake   chan struct{}
	hist   map[string]*metrics.Histogram // by peer address
}

func newPropagation(s *Server, p policy.Propagation) *propagation {
	t := &propagation{s: s, policy: normalPropagation(p), zones: map[string][]*status.Propagation{}, dirty: map[string]bool{},
		change: make(chan struct{}), wake: make(chan struct{}, 1), hist: map[string]*metrics.Histogram{}}
	if stored, err := s.store.Propagation(); err == nil {
		for zone, b := range stored {
			var list []*status.Propagation
			if json.Unmarshal(b, &list) == nil {
				t.zones[zone] = list
			}
		}
	}
	return t
}

// commit starts tracking the new serials of a commit.
func (t *propagation) commit(c *db.Committed, now time.Time) {
	acc := t.s.access.Load()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, zu := range c.Zones {
		if zu.Removed {
			delete(t.zones, zu.Zone)
			t.dirty[zu.Zone] = true
			continue
		}
		p := &status.Propagation{Zone: zu.Zone, Serial: zu.Serial, State: status.StatePending, Committed: now, Peers: []status.PeerPropagation{}}
		for _, to := range t.s.expectedTargets(acc, zu.Zone) {
			p.Peers = append(p.Peers, status.PeerPropagation{Address: to.Addr().Unmap().String(), State: status.StatePending, Seconds: -1, Target: to})
		}
		// What peers had for the previous serial carries over.
		if prev := t.latest(zu.Zone); prev != nil {
			for i := range p.Peers {
				for _, pp := range prev.Peers {
					if pp.Target == p.Peers[i].Target {
						p.Peers[i].Serial = pp.Serial
					}
				}
			}
		}
		t.settle(p)
		list := append(t.zones[zu.Zone], p)
		if len(list) > keptSerials {
			list = list[len(list)-keptSerials:]
		}
		t.zones[zu.Zone] = list
		t.dirty[zu.Zone] = true
	}
	t.changed()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *propagation) latest(zone string) *status.Propagation {
	list := t.zones[zone]
	if len(list) == 0 {
		return nil
	}
	return list[len(list)-1]
}

// observe records that the peer polled at target serves serial of zone,
// which can activate several tracked serials at once.
func (t *propagation) observe(target netip.AddrPort, zone string, serial, signerSerial uint32, now time.Time) {
	// A signer's SOA names a serial of its own; serial is then cns's.
	ahead := ""
	if signerSerial == 0 {
		ahead = t.s.serials.peerAhead(zone, target, serial)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	touched := false
	for _, p := range t.zones[zone] {
		for i := range p.Peers {
			pp := &p.Peers[i]
			if pp.Target != target {
				continue
			}
			if signerSerial != 0 && pp.SignerSerial != signerSerial {
				pp.SignerSerial = signerSerial
				touched = true
			}
			if pp.Serial == 0 || db.SerialLess(pp.Serial, serial) {
				pp.Serial = serial
				touched = true
			}
			if ahead != "" && pp.State != status.StateActive {
				pp.State, pp.Error = status.StateError, ahead
				touched = true
				continue
			}
			if pp.State != status.StateActive && (serial == p.Serial || db.SerialLess(p.Serial, serial)) {
				pp.State = status.StateActive
				// Committed may come from a run whose clock was ahead.
				pp.Seconds = max(now.Sub(p.Committed).Seconds(), 0)
				t.histogram(pp.Target.String()).Observe(pp.Seconds)
				touched = true
			}
		}
		t.settle(p)
	}
	if touched {
		t.dirty[zone] = true
		t.changed()
	}
}

// settle derives a serial's state from its peers'.
func (t *propagation) settle(p *status.Propagation) {
	if len(p.Peers) == 0 {
		p.State = status.StateActive
		return
	}
	active, failed := 0, 0
	for _, pp := range p.Peers {
		switch pp.State {
		case status.StateActive:
			active++
		case status.StateError:
			failed++
		}
	}
	need := (len(p.Peers)*t.policy.ThresholdPercent + 99) / 100
	switch {
	case active >= need:
		p.State = status.StateActive
	case len(p.Peers)-failed < need:
		p.State = status.StateError
	default:
		p.State = status.StatePending
	}
}

func (t *propagation) changed() {
	close(t.change)
	t.change = make(chan struct{})
}

// run polls pending peers, re-syncs lagging ones and saves the state,
// until ctx ends.
func (t *propagation) run(ctx context.Context) {
	save := time.NewTicker(2 * time.Second)
	defer save.Stop()
	sync := time.NewTicker(t.policy.PeriodicSync)
	defer sync.Stop()
	poll := time.NewTimer(t.policy.PollDelay)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			t.save()
			return
		case <-save.C:
			t.save()
		case <-sync.C:
			t.resync()
		case <-t.wake:
			poll.Reset(t.policy.PollDelay)
		case <-poll.C:
			if t.pollPending(ctx) {
				poll.Reset(t.policy.PollInterval)
			}
		}
	}
}

// pollPending asks every pending peer of the newest serials for its SOA
// (in parallel), and reports whether anything is still pending.
func (t *propagation) pollPending(ctx context.Context) bool {
	type job struct {
		zone   string
		target netip.AddrPort
	}
	var jobs []job
	seen := map[job]bool{}
	t.mu.Lock()
	for zone, list := range t.zones {
		for _, p := range list {
			if p.State != status.StatePending {
				continue
			}
			for i := range p.Peers {
				pp := &p.Peers[i]
				if pp.State != status.StatePending {
					continue
				}
				pp.Polls++
				if pp.Polls > t.policy.PollMaxRetries {
					pp.State = status.StateError
					t.s.log.Warn("propagation: peer does not serve the serial", "zone", zone, "serial", p.Serial, "peer", pp.Address, "has", pp.Serial)
					continue
				}
				j := job{zone, pp.Target}
				if !seen[j] {
					seen[j] = true
					jobs = append(jobs, j)
				}
			}
			t.settle(p)
			t.dirty[zone] = true
		}
	}
	t.changed()
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			if reported, ok := t.soa(ctx, j.target, j.zone); ok {
				now := time.Now()
				serves, signer := t.s.peers.observeSOA(j.target.Addr(), j.zone, reported, now)
				own := uint32(0)
				if signer {
					own = reported
				}
				t.observe(j.target, j.zone, serves, own, now)
			}
		})
	}
	wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, list := range t.zones {
		for _, p := range list {
			if p.State == status.StatePending {
				return true
			}
		}
	}
	return false
}

// soa asks target for zone's serial.
func (t *propagation) soa(ctx context.Context, target netip.AddrPort, zone string) (uint32, bool) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(zone), dns.TypeSOA)
	c := &dns.Client{Timeout: t.policy.PollTimeout}
	r, _, err := c.ExchangeContext(ctx, m, target.String())
	if err != nil || r.Rcode != dns.RcodeSuccess {
		return 0, false
	}
	for _, rr := range r.Answer {
		if soa, ok := rr.(*dns.SOA); ok {
			return soa.Serial, true
		}
	}
	return 0, false
}

// resync NOTIFYs again the peers that lag behind a zone's newest serial
// and polls them, so an ERROR heals once the peer catches up. A peer no
// longer expected to serve the zone (forgotten, silent, no longer
// configured) leaves the serial's tracking.
func (t *propagation) resync() {
	acc := t.s.access.Load()
	t.mu.Lock()
	var lagging []struct {
		zone   string
		serial uint32
		to     netip.AddrPort
	}
	for zone, list := range t.zones {
		p := list[len(list)-1]
		expected := t.s.expectedTargets(acc, zone)
		kept := p.Peers[:0]
		for _, pp := range p.Peers {
			if pp.State == status.StateActive || slices.Contains(expected, pp.Target) {
				kept = append(kept, pp)
			}
		}
		if len(kept) != len(p.Peers) {
			p.Peers = kept
			t.dirty[zone] = true
		}
		for i := range p.Peers {
			pp := &p.Peers[i]
			if pp.State == status.StateActive {
				continue
			}
			pp.State, pp.Polls = status.StatePending, 0
			lagging = append(lagging, struct {
				zone   string
				serial uint32
				to     netip.AddrPort
			}{zone, p.Serial, pp.Target})
		}
		t.settle(p)
	}
	t.changed()
	t.mu.Unlock()
	if len(lagging) == 0 {
		return
	}
	t.s.notify.mu.Lock()
	for _, l := range lagging {
		t.s.notify.queue(acc, l.zone, l.to, l.serial)
	}
	t.s.notify.mu.Unlock()
	t.s.notify.poke()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// save writes changed zones' tracking to the store.
func (t *propagation) save() {
	t.mu.Lock()
	if len(t.dirty) == 0 {
		t.mu.Unlock()
		return
	}
	batch := map[string][]byte{}
	for zone := range t.dirty {
		if list, ok := t.zones[zone]; ok {
			batch[zone], _ = json.Marshal(list)
		} else {
			batch[zone] = nil
		}
	}
	t.dirty = map[string]bool{}
	t.mu.Unlock()
	if err := t.s.store.SavePropagation(batch); err != nil && !errors.Is(err, db.ErrReadOnly) {
		t.s.log.Warn("saving propagation state", "err", err)
	}
}

// get returns a copy of the tracking of zone's serial (0: the newest).
func (t *propagation) get(zone string, serial uint32) (status.Propagation, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := t.zones[zone]
	for i := len(list) - 1; i >= 0; i-- {
		if serial == 0 || list[i].Serial == serial {
			p := *list[i]
			p.Peers = slices.Clone(p.Peers)
			sort.Slice(p.Peers, func(a, b int) bool { return p.Peers[a].Address < p.Peers[b].Address })
			return p, true
		}
	}
	return status.Propagation{}, false
}

func (t *propagation) changedCh() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.change
}

// PropagationBounds are the propagation histograms' upper bounds, seconds.
var PropagationBounds = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

func (t *propagation) histogram(addr string) *metrics.Histogram {
	h := t.hist[addr]
	if h == nil {
		nh := metrics.NewHistogram(PropagationBounds)
		h = &nh
		t.hist[addr] = h
	}
	return h
}

// Propagation returns how far serial (0: the newest tracked) of zone has
// spread.
func (s *Server) Propagation(zone string, serial uint32) (status.Propagation, bool) {
	return s.prop.get(zone, serial)
}

// PropagationChanged returns a channel closed at the next change of any
// zone's propagation, for long polls.
func (s *Server) PropagationChanged() <-chan struct{} { return s.prop.changedCh() }

// PropagationHistograms returns per peer (NOTIFY address) the histogram of commit-to-serving
// times: cumulative counts per PropagationBounds, count and sum.
func (s *Server) PropagationHistograms() map[string]metrics.Histogram {
	s.prop.mu.Lock()
	defer s.prop.mu.Unlock()
	out := map[string]metrics.Histogram{}
	for a, h := range s.prop.hist {
		out[a] = h.Clone()
	}
	return out
}
