package serve

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

// Peer is what cns knows of one secondary, persisted in the store.
type Peer struct {
	Address string `json:"address"`
	// Version is what the peer says it runs (CHAOS version.server or
	// version.bind), "" when it does not say.
	Version   string    `json:"version,omitempty"`
	VersionAt time.Time `json:"version_at,omitzero"`
	// Zones it transfers, by zone name.
	Zones map[string]*PeerZone `json:"zones"`
	// NotifyFailures counts NOTIFYs that went unanswered since the last
	// answered one.
	NotifyFailures int `json:"notify_failures"`
	// Counters are the reference implementation's: soa, axfr, ixfr,
	// goodxfer.
	Counters map[string]uint64 `json:"counters"`
}

// PeerZone is one peer's view of one zone.
type PeerZone struct {
	// Serial is the newest of cns's serials the peer is known to serve:
	// the serial of its last transfer, or what it answered to an SOA
	// probe; for a signer, the serial it had transferred when its own
	// serial last advanced (see signers.go).
	Serial   uint32    `json:"serial"`
	SerialAt time.Time `json:"serial_at,omitzero"`
	// TransferSerial is the serial the last transfer to the peer ended
	// at, Sent the last few such serials (newest last).
	TransferSerial uint32   `json:"transfer_serial,omitempty"`
	Sent           []uint32 `json:"sent,omitempty"`
	// Signer marks a peer that serves the zone under serials of its own
	// (a DNSSEC signer: Knot's dnssec-signing, BIND's inline-signing),
	// detected or set in config; SignerSerial is the serial it reports
	// and SignerSerialAt when that last advanced.
	Signer         bool      `json:"signer,omitempty"`
	SignerSerial   uint32    `json:"signer_serial,omitempty"`
	SignerSerialAt time.Time `json:"signer_serial_at,omitzero"`
	// LastTransfer and LastKind describe the last transfer (AXFR, IXFR,
	// IXFR-SOA when it was up to date).
	LastTransfer time.Time `json:"last_transfer,omitzero"`
	LastKind     string    `json:"last_kind,omitempty"`
	AXFR         uint64    `json:"axfr"`
	IXFR         uint64    `json:"ixfr"`
	// NOTIFY bookkeeping.
	NotifySerial uint32    `json:"notify_serial,omitempty"`
	NotifySent   time.Time `json:"notify_sent,omitzero"`
	NotifyAcked  time.Time `json:"notify_acked,omitzero"`
	LastSOAQuery time.Time `json:"last_soa_query,omitzero"`
}

// peerTracker keeps peers in memory and writes changes to the store every
// few seconds, never on the query path.
type peerTracker struct {
	store *db.DB
	s     *Server

	mu     sync.Mutex
	peers  map[netip.Addr]*Peer
	dirty  map[netip.Addr]bool
	probes chan probe
	change chan struct{} // closed and replaced on every change
}

// probe asks a peer for its SOA serial of a zone and its version, a moment
// after it transferred.
type probe struct {
	addr netip.Addr
	zone string
	at   time.Time
}

func newPeerTracker(s *Server, store *db.DB) *peerTracker {
	t := &peerTracker{store: store, s: s, peers: map[netip.Addr]*Peer{}, dirty: map[netip.Addr]bool{}, probes: make(chan probe, 256), change: make(chan struct{})}
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
		var p Peer
		if json.Unmarshal(v, &p) != nil {
			continue
		}
		if p.Zones == nil {
			p.Zones = map[string]*PeerZone{}
		}
		if p.Counters == nil {
			p.Counters = map[string]uint64{}
		}
		t.peers[addr] = &p
	}
	return t
}

// peer returns the record of addr, creating it. Callers hold mu.
func (t *peerTracker) peer(addr netip.Addr) *Peer {
	addr = addr.Unmap()
	p := t.peers[addr]
	if p == nil {
		p = &Peer{Address: addr.String(), Zones: map[string]*PeerZone{}, Counters: map[string]uint64{}}
		t.peers[addr] = p
	}
	t.dirty[addr] = true
	close(t.change)
	t.change = make(chan struct{})
	return p
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

func (t *peerTracker) transferred(addr netip.Addr, zone string, r transferResult) {
	now := time.Now()
	t.mu.Lock()
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
	t.mu.Unlock()
	select {
	case t.probes <- probe{addr: addr.Unmap(), zone: zone, at: now.Add(time.Second)}:
	default: // probes are a courtesy; never block a transfer on them
	}
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
	p.zone(zone).LastSOAQuery = time.Now()
	p.Counters["soa"]++
}

func (t *peerTracker) notifySent(addr netip.Addr, zone string, serial uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	z := t.peer(addr).zone(zone)
	z.NotifySerial, z.NotifySent = serial, time.Now()
}

func (t *peerTracker) notifyAcked(addr netip.Addr, zone string, serial uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peer(addr)
	p.zone(zone).NotifyAcked = time.Now()
	p.NotifyFailures = 0
}

func (t *peerTracker) notifyFailed(addr netip.Addr, zone string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.peer(addr).NotifyFailures++
}

// transferredZone lists the peers that have transferred zone.
func (t *peerTracker) transferredZone(zone string) []netip.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []netip.Addr
	for a, p := range t.peers {
		if z := p.Zones[zone]; z != nil && !z.LastTransfer.IsZero() {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

// list returns copies of every peer, by address.
func (t *peerTracker) list() []Peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Peer, 0, len(t.peers))
	for _, a := range slices.SortedFunc(maps.Keys(t.peers), func(a, b netip.Addr) int { return a.Compare(b) }) {
		out = append(out, t.peers[a].clone())
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
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.peers[addr] == nil {
		return false
	}
	delete(t.peers, addr)
	t.dirty[addr] = true
	return true
}

// flush writes changed peers to the store.
func (t *peerTracker) flush() error {
	t.mu.Lock()
	if len(t.dirty) == 0 {
		t.mu.Unlock()
		return nil
	}
	batch := map[string][]byte{}
	for a := range t.dirty {
		if p := t.peers[a]; p != nil {
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
			// A read-only db (cns serve said so at start) keeps peers in memory.
			if err := t.flush(); err != nil && !errors.Is(err, db.ErrReadOnly) {
				t.s.log.Warn("saving peer state", "err", err)
			}
		case p := <-t.probes:
			go t.probe(ctx, p)
		}
	}
}

// probe asks the peer, at its NOTIFY address, for the zone's SOA serial
// and, once an hour, its version.
func (t *peerTracker) probe(ctx context.Context, p probe) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(p.at)):
	}
	to := netip.AddrPortFrom(p.addr, 53)
	for _, n := range t.s.access.Load().notifyTargets(p.zone) {
		if n.Addr().Unmap() == p.addr {
			to = n
			break
		}
	}
	c := &dns.Client{Timeout: 2 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(p.zone), dns.TypeSOA)
	if r, _, err := c.Exchange(m, to.String()); err == nil && len(r.Answer) > 0 {
		if soa, ok := r.Answer[0].(*dns.SOA); ok {
			serves, _ := t.observeSOA(p.addr, p.zone, soa.Serial, time.Now())
			t.mu.Lock()
			if cur, ok := t.s.ZoneSerial(p.zone); ok && cur == serves {
				t.peer(p.addr).Counters["goodxfer"]++
			}
			t.mu.Unlock()
		}
	}
	t.mu.Lock()
	stale := time.Since(t.peer(p.addr).VersionAt) > time.Hour
	t.mu.Unlock()
	if !stale {
		return
	}
	version := ""
	for _, name := range []string{"version.server.", "version.bind."} {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeTXT)
		m.Question[0].Qclass = dns.ClassCHAOS
		if r, _, err := c.Exchange(m, to.String()); err == nil && len(r.Answer) > 0 {
			if txt, ok := r.Answer[0].(*dns.TXT); ok && len(txt.Txt) > 0 {
				version = strings.Join(txt.Txt, "")
				if name == "version.bind." && strings.HasPrefix(version, "9.") {
					version = "ISC BIND " + version
				}
				break
			}
		}
	}
	t.mu.Lock()
	pp := t.peer(p.addr)
	pp.Version, pp.VersionAt = version, time.Now()
	t.mu.Unlock()
}
