package serve

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/db"
)

// Peer is what cns knows of one secondary, persisted in the store.
type Peer struct {
	Address string `json:"address"`
	// State is where a learned peer stands (peerstate.go); a configured
	// peer is NOTIFYed and counted whatever its state. Configured is set
	// on the copies Peers returns: the config names the peer.
	State      PeerState `json:"state"`
	Configured bool      `json:"-"`
	// Version is what the peer says it runs (CHAOS version.server or
	// version.bind, or version._cns_meta), "" when it does not say;
	// VersionAt is when it last answered the version probe.
	Version   string    `json:"version,omitempty"`
	VersionAt time.Time `json:"version_at,omitzero"`
	// VersionFailures counts version probes in a row that got no answer
	// at all, the last at VersionTriedAt: retried with backoff.
	VersionFailures int       `json:"version_failures,omitempty"`
	VersionTriedAt  time.Time `json:"version_tried_at,omitzero"`
	// Zones it transfers, by zone name.
	Zones map[string]*PeerZone `json:"zones"`
	// NotifyFailures counts NOTIFYs that went unanswered (or were
	// refused) since the last answered one, the last at NotifyFailedAt.
	NotifyFailures int       `json:"notify_failures"`
	NotifyFailedAt time.Time `json:"notify_failed_at,omitzero"`
	// ProbeFailures counts SOA probes in a row left unanswered, the last
	// at ProbedAt.
	ProbeFailures int       `json:"probe_failures,omitempty"`
	ProbedAt      time.Time `json:"probed_at,omitzero"`
	// Counters are the reference implementation's: soa, axfr, ixfr,
	// goodxfer.
	Counters map[string]uint64 `json:"counters"`
}

// PeerZone is one peer's view of one zone: what the API shows of it
// (status.ZoneTracking, in the form it is stored), and the tracker's own
// bookkeeping.
type PeerZone struct {
	status.ZoneTracking
	// SerialAt is when Serial was learned; for a signer (see signers.go)
	// Serial is what it had transferred when its own serial last
	// advanced, and SignerSerialAt when that was.
	SerialAt       time.Time `json:"serial_at,omitzero"`
	SignerSerialAt time.Time `json:"signer_serial_at,omitzero"`
	// TransferSerial is the serial the last transfer to the peer ended
	// at, Sent the last few such serials (newest last).
	TransferSerial uint32   `json:"transfer_serial,omitempty"`
	Sent           []uint32 `json:"sent,omitempty"`
}

// peerTracker keeps peers in memory and writes changes to the store every
// few seconds, never on the query path.
type peerTracker struct {
	store *db.DB
	s     *Server
	// local tells the addresses never learned from (loopback), port is
	// where learned peers are probed and NOTIFYed (53), probeDelay the
	// wait between a transfer and its probe, probeTimeout the wait for
	// each answer; tests change them.
	local        func(netip.Addr) bool
	port         uint16
	probeDelay   time.Duration
	probeTimeout time.Duration

	mu      sync.Mutex
	peers   map[netip.Addr]*Peer
	dirty   map[netip.Addr]bool
	pending map[probe]bool // probes queued or running
	probes  chan probe
	change  chan struct{} // closed and replaced on every change
}

// probe asks a client, after it transferred a zone, for the zone's SOA
// serial and its version.
type probe struct {
	addr netip.Addr
	zone string
	to   netip.AddrPort
}

func newPeerTracker(s *Server, store *db.DB) *peerTracker {
	t := &peerTracker{store: store, s: s, local: netip.Addr.IsLoopback, port: 53, probeDelay: probeDelay, probeTimeout: 2 * time.Second,
		peers: map[netip.Addr]*Peer{}, dirty: map[netip.Addr]bool{}, pending: map[probe]bool{},
		probes: make(chan probe, 256), change: make(chan struct{})}
	stored, err := store.Peers()
	if err != nil {
		s.log.Warn("stored peers unreadable; starting without", "err", err)
		return t
	}
	for k, v := range stored {
		addr, err := netip.ParseAddr(k)
		if err != nil {
			continue
		}
		p, err := StoredPeer(v)
		if err != nil {
			continue
		}
		t.peers[addr] = &p
	}
	return t
}

// StoredPeer decodes a peer as the store holds it. A peer stored before
// states existed gets the state it has now (legacyState).
func StoredPeer(raw []byte) (Peer, error) {
	var p Peer
	if err := json.Unmarshal(raw, &p); err != nil {
		return Peer{}, err
	}
	if p.Zones == nil {
		p.Zones = map[string]*PeerZone{}
	}
	if p.Counters == nil {
		p.Counters = map[string]uint64{}
	}
	if addr, err := netip.ParseAddr(p.Address); err == nil && p.State == "" {
		p.State = legacyState(addr, &p)
	}
	return p, nil
}

// peer returns the record of addr, creating it. Callers hold mu.
func (t *peerTracker) peer(addr netip.Addr) *Peer {
	addr = addr.Unmap()
	p := t.peers[addr]
	if p == nil {
		p = &Peer{Address: addr.String(), State: PeerProbing, Zones: map[string]*PeerZone{}, Counters: map[string]uint64{}}
		t.peers[addr] = p
	}
	t.touch(addr)
	return p
}

// touch notes a change of addr's record. Callers hold mu.
func (t *peerTracker) touch(addr netip.Addr) {
	t.dirty[addr] = true
	close(t.change)
	t.change = make(chan struct{})
}

// changed returns a channel closed at the next change.
func (t *peerTracker) changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.change
}

func (p *Peer) zone(name string) *PeerZone {
	z := p.Zones[name]
	if z == nil {
		z = &PeerZone{}
		p.Zones[name] = z
	}
	return z
}

// listed reports whether a record is a peer: configured, or a learned
// one that answered. Callers hold mu.
func (t *peerTracker) listed(acc *access, addr netip.Addr, p *Peer) bool {
	if acc.configured(addr) {
		return true
	}
	return !t.local(addr) && p.State != PeerProbing
}

// transferred notes a transfer to addr and, unless the client is one
// never learned from, has it probed.
func (t *peerTracker) transferred(addr netip.Addr, zone string, r transferResult) {
	addr = addr.Unmap()
	acc := t.s.access.Load()
	configured := acc.configured(addr)
	if !configured && t.local(addr) {
		return // a loopback client is no secondary cns can reach
	}
	now := t.s.now()
	t.mu.Lock()
	if t.peers[addr] == nil && !configured && t.candidates() >= maxCandidates {
		t.mu.Unlock()
		return
	}
	p := t.peer(addr)
	z := p.zone(zone)
	z.sent(r.serial)
	z.Signer = z.Signer || t.s.forcedSigner(addr)
	if !z.Signer {
		z.Serial, z.SerialAt = r.serial, now
	}
	z.LastTransfer, z.LastKind = now, r.kind
	switch r.kind {
	case "AXFR":
		z.AXFR++
		p.Counters["axfr"]++
	default:
		z.IXFR++
		p.Counters["ixfr"]++
	}
	to, ok := t.probeTarget(acc, addr, zone)
	pr := probe{addr: addr, zone: zone, to: to}
	if !ok || !p.probeDue(now) || t.pending[pr] {
		t.mu.Unlock()
		return
	}
	t.pending[pr] = true
	t.mu.Unlock()
	select {
	case t.probes <- pr:
	default: // probes are a courtesy; never block a transfer on them
		t.mu.Lock()
		delete(t.pending, pr)
		t.mu.Unlock()
	}
}

// candidates counts the clients waiting to answer a probe. Callers hold
// mu.
func (t *peerTracker) candidates() int {
	n := 0
	for _, p := range t.peers {
		if p.State == PeerProbing {
			n++
		}
	}
	return n
}

// probeTarget is where addr is asked about zone: its also_notify target
// for the zone, else port 53 (t.port), except on loopback, where only a
// configured target is known.
func (t *peerTracker) probeTarget(acc *access, addr netip.Addr, zone string) (netip.AddrPort, bool) {
	for _, n := range acc.notifyTargets(zone) {
		if n.Addr().Unmap() == addr {
			return n, true
		}
	}
	if t.local(addr) {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(addr, t.port), true
}

// soaQuery notes an SOA query at a zone apex from a known peer.
func (t *peerTracker) soaQuery(addr netip.Addr, zone string) {
	addr = addr.Unmap()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.peers[addr] == nil {
		return
	}
	p := t.peer(addr)
	p.zone(zone).LastSOAQuery = t.s.now()
	p.Counters["soa"]++
}

func (t *peerTracker) notifySent(addr netip.Addr, zone string, serial uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	z := t.peer(addr).zone(zone)
	z.NotifySerial, z.NotifySent = serial, t.s.now()
}

// notifyPlan says how addr is NOTIFYed (Peer.notifyPlan); ok is false
// when it is not to be NOTIFYed.
func (t *peerTracker) notifyPlan(acc *access, addr netip.Addr) (tries int, notBefore time.Time, ok bool) {
	addr = addr.Unmap()
	configured := acc.configured(addr)
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[addr]
	if p == nil {
		return notifyMaxTries, time.Time{}, configured
	}
	return p.notifyPlan(configured)
}

func (t *peerTracker) notifyAnswered(addr netip.Addr, zone string) {
	now := t.s.now()
	t.mu.Lock()
	p := t.peer(addr)
	was := p.State
	p.zone(zone).NotifyAcked = now
	p.on(notifyAnswered, now)
	t.mu.Unlock()
	if was == PeerSilent {
		t.s.log.Info("peer answers NOTIFY again", "peer", addr.Unmap().String(), "zone", zone)
	}
}

func (t *peerTracker) notifyUnanswered(addr netip.Addr, zone string) {
	now := t.s.now()
	t.mu.Lock()
	p := t.peer(addr)
	was := p.State
	p.on(notifyUnanswered, now)
	failures := p.NotifyFailures
	t.mu.Unlock()
	if was != PeerSilent && p.State == PeerSilent {
		t.s.log.Warn("peer leaves NOTIFYs unanswered: NOTIFYing it with backoff (up to an hour) and not waiting for it in propagation until it answers",
			"peer", addr.Unmap().String(), "zone", zone, "unanswered", failures)
	}
}

// learned lists the learned peers that transferred zone and are
// answering (and, with silent, those that are silent too).
func (t *peerTracker) learned(zone string, silent bool) []netip.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []netip.Addr
	for a, p := range t.peers {
		if t.local(a) {
			continue
		}
		if z := p.Zones[zone]; z == nil || z.LastTransfer.IsZero() {
			continue
		}
		if p.State == PeerAnswering || (silent && p.State == PeerSilent) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

// list returns copies of every peer, by address.
func (t *peerTracker) list() []Peer {
	acc := t.s.access.Load()
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Peer, 0, len(t.peers))
	for _, a := range slices.SortedFunc(maps.Keys(t.peers), func(a, b netip.Addr) int { return a.Compare(b) }) {
		if p := t.peers[a]; t.listed(acc, a, p) {
			c := p.clone()
			c.Configured = acc.configured(a)
			out = append(out, c)
		}
	}
	return out
}

func (p *Peer) clone() Peer {
	c := *p
	c.Zones = make(map[string]*PeerZone, len(p.Zones))
	for k, z := range p.Zones {
		zz := *z
		zz.Sent = slices.Clone(z.Sent)
		c.Zones[k] = &zz
	}
	c.Counters = maps.Clone(p.Counters)
	return c
}

// forget deletes a peer; it returns false when it was unknown.
func (t *peerTracker) forget(addr netip.Addr) bool {
	addr = addr.Unmap()
	acc := t.s.access.Load()
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[addr]
	if p == nil {
		return false
	}
	delete(t.peers, addr)
	t.touch(addr)
	return t.listed(acc, addr, p)
}

// prune drops what is no peer any more: loopback records the config no
// longer names (a reload), and clients that never answered a probe and
// stopped transferring.
func (t *peerTracker) prune(now time.Time) {
	acc := t.s.access.Load()
	t.mu.Lock()
	defer t.mu.Unlock()
	for a, p := range t.peers {
		if acc.configured(a) {
			continue
		}
		if t.local(a) || (p.State == PeerProbing && now.Sub(p.lastTransfer()) > candidateTTL) {
			delete(t.peers, a)
			t.touch(a)
		}
	}
}

func (p *Peer) lastTransfer() time.Time {
	var last time.Time
	for _, z := range p.Zones {
		if z.LastTransfer.After(last) {
			last = z.LastTransfer
		}
	}
	return last
}

// flush writes changed peers to the store; what is no peer is not
// stored.
func (t *peerTracker) flush() error {
	acc := t.s.access.Load()
	t.mu.Lock()
	if len(t.dirty) == 0 {
		t.mu.Unlock()
		return nil
	}
	batch := map[string][]byte{}
	for a := range t.dirty {
		if p := t.peers[a]; p != nil && t.listed(acc, a, p) {
			b, _ := json.Marshal(p)
			batch[a.String()] = b
		} else {
			batch[a.String()] = nil
		}
	}
	t.dirty = map[netip.Addr]bool{}
	t.mu.Unlock()
	return t.store.SavePeers(batch)
}

// run flushes every few seconds and runs the probes until ctx ends.
func (t *peerTracker) run(ctx context.Context) {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			t.flush()
			return
		case <-tick.C:
			t.prune(t.s.now())
			// A read-only db (cns serve said so at start) keeps peers in memory.
			if err := t.flush(); err != nil && !errors.Is(err, db.ErrReadOnly) {
				t.s.log.Warn("saving peer state", "err", err)
			}
		case p := <-t.probes:
			go t.probe(ctx, p)
		}
	}
}

// probe asks the client for the zone's SOA a moment after its transfer:
// an authoritative answer makes it a peer, and tells the serial it
// serves. Then, when due, it asks for its version.
func (t *peerTracker) probe(ctx context.Context, p probe) {
	defer func() {
		t.mu.Lock()
		delete(t.pending, p)
		t.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return
	case <-time.After(t.probeDelay):
	}
	c := &dns.Client{Timeout: t.probeTimeout}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(p.zone), dns.TypeSOA)
	var soa *dns.SOA
	r, _, err := c.ExchangeContext(ctx, m, p.to.String())
	if err == nil && r.Authoritative && r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 {
		soa, _ = r.Answer[0].(*dns.SOA)
	}
	if ctx.Err() != nil {
		return
	}
	now := t.s.now()
	t.mu.Lock()
	pp := t.peers[p.addr]
	if pp == nil { // forgotten meanwhile
		t.mu.Unlock()
		return
	}
	was := pp.State
	if soa != nil {
		pp.on(probeAnswered, now)
	} else {
		pp.on(probeUnanswered, now)
	}
	t.touch(p.addr)
	t.mu.Unlock()
	if soa == nil {
		return
	}
	if was == PeerProbing {
		t.s.log.Info("secondary answered its SOA probe: now a peer", "peer", p.addr.String(), "zone", p.zone, "at", p.to.String())
	}
	serves, _ := t.observeSOA(p.addr, p.zone, soa.Serial, now)
	t.mu.Lock()
	if cur, ok := t.s.ZoneSerial(p.zone); ok && cur == serves && t.peers[p.addr] == pp {
		pp.Counters["goodxfer"]++
		t.touch(p.addr)
	}
	due := pp.versionDue(now)
	t.mu.Unlock()
	if due {
		t.probeVersion(ctx, c, p.addr, p.to)
	}
}
