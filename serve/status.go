package serve

import (
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/tritondatacenter/cns/admin/metrics"
	"github.com/tritondatacenter/cns/admin/status"
)

// What the admin API reads from a running server (Server is its
// admin.DNS), in the read shapes of admin/status. Everything returned is a
// copy.

// Zones lists the served zones by name.
func (s *Server) Zones() []status.ZoneSummary {
	var out []status.ZoneSummary
	for _, z := range s.snap.Load().zones {
		out = append(out, status.ZoneSummary{Name: z.name, Serial: z.serial})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Peers lists the secondaries cns knows of, by address, as the tracker
// keeps them.
func (s *Server) Peers() []Peer { return s.peers.list() }

// PeerStatus lists the secondaries cns knows of, by address, as the API
// shows them.
func (s *Server) PeerStatus() []status.Peer {
	var out []status.Peer
	for _, p := range s.peers.list() {
		out = append(out, p.Status())
	}
	return out
}

// Status is what the tracker knows of p as the API shows it; the read
// model derives the rest (its serials, flags and drift). A configured
// peer's state is status.PeerConfigured.
func (p *Peer) Status() status.Peer {
	out := status.Peer{Address: p.Address, Version: p.Version, NotifyFailures: p.NotifyFailures, Counters: p.Counters,
		State: string(p.State), Zones: make(map[string]status.PeerZone, len(p.Zones))}
	if p.Configured {
		out.State = status.PeerConfigured
	}
	for z, pz := range p.Zones {
		if pz != nil {
			out.Zones[z] = status.PeerZone{ZoneTracking: pz.ZoneTracking}
		}
	}
	return out
}

// StoredPeerStatus decodes a peer as the store holds it (StoredPeer) and
// returns it as the API shows it: the offline read model's view of the
// peers a server tracked.
func StoredPeerStatus(raw []byte) (status.Peer, error) {
	p, err := StoredPeer(raw)
	if err != nil {
		return status.Peer{}, err
	}
	return p.Status(), nil
}

// DeletePeer forgets a peer (its counters and serials); a peer that keeps
// transferring comes back. It reports whether the peer was known.
func (s *Server) DeletePeer(addr netip.Addr) bool { return s.peers.forget(addr) }

// PeersChanged returns a channel closed at the next change of peer state,
// for long polls.
func (s *Server) PeersChanged() <-chan struct{} { return s.peers.changed() }

// AllowedPeers lists who may transfer what: the transfer ACL, then every
// address a zone's peers and NOTIFY targets name, with those zones.
func (s *Server) AllowedPeers() []status.AllowedPeer {
	a := s.access.Load()
	type entry struct {
		prefix netip.Prefix
		zones  []string // nil: every zone
	}
	var entries []entry
	for _, p := range a.AllowTransfer {
		entries = append(entries, entry{prefix: p})
	}
	byAddr := map[netip.Addr][]string{}
	add := func(zone string, za ZoneAccess) {
		for _, p := range za.Peers {
			byAddr[p] = append(byAddr[p], zone)
		}
		for _, n := range za.Notify {
			byAddr[n.Addr().Unmap()] = append(byAddr[n.Addr().Unmap()], zone)
		}
	}
	for zone, za := range a.Zones {
		add(zone, za)
	}
	add("*.arpa", a.Reverse)
	for addr, zones := range byAddr {
		slices.Sort(zones)
		entries = append(entries, entry{prefix: netip.PrefixFrom(addr, addr.BitLen()), zones: slices.Compact(zones)})
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].prefix.String() < entries[j].prefix.String() })
	out := make([]status.AllowedPeer, 0, len(entries))
	for _, e := range entries {
		out = append(out, status.AllowedPeer{Address: e.prefix.Addr().String(), Mask: e.prefix.Bits(), Zones: e.zones})
	}
	return out
}

// ZonePeers lists the addresses expected to serve zone: configured peers,
// NOTIFY targets and secondaries that transferred it.
func (s *Server) ZonePeers(zone string) []netip.Addr {
	a := s.access.Load()
	var out []netip.Addr
	for _, t := range s.expectedTargets(a, zone) {
		if addr := t.Addr().Unmap(); !slices.Contains(out, addr) {
			out = append(out, addr)
		}
	}
	slices.SortFunc(out, func(x, y netip.Addr) int { return x.Compare(y) })
	return out
}

// TransferStats counts transfers served.
type TransferStats struct {
	AXFR, IXFR, UpToDate, Refused uint64
}

func (s *Server) TransferStats() TransferStats {
	return TransferStats{AXFR: s.xfrAXFR.Load(), IXFR: s.xfrIXFR.Load(), UpToDate: s.xfrUpToDate.Load(), Refused: s.xfrRefused.Load()}
}

// NotifyStatus is one NOTIFY target's state.
type NotifyStatus struct {
	Zone    string
	Target  netip.AddrPort
	Serial  uint32 // to announce
	Acked   uint32 // last serial answered
	Tries   int
	Sent    time.Time
	Pending bool
}

// NotifyStatus lists the NOTIFY targets.
func (s *Server) NotifyStatus() []NotifyStatus {
	var out []NotifyStatus
	for k, st := range s.notify.pending() {
		out = append(out, NotifyStatus{Zone: k.zone, Target: k.to, Serial: st.serial, Acked: st.acked, Tries: st.tries, Sent: st.sent, Pending: st.acked != st.serial})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Zone != out[j].Zone {
			return out[i].Zone < out[j].Zone
		}
		return out[i].Target.String() < out[j].Target.String()
	})
	return out
}

// Metrics are the server's counters for GET /metrics.
func (s *Server) Metrics() metrics.DNS {
	qs, fs, ts := s.QueryStats(), s.ForwardStats(), s.TransferStats()
	m := metrics.DNS{AnswersByType: qs.ByType, AnswersByRcode: qs.ByRcode, Dropped: qs.Dropped,
		ClientScoped: qs.ClientScoped, ClientUnidentified: qs.Unidentified,
		ForwardHits: fs.Hits, ForwardMisses: fs.Misses, ForwardFailures: fs.Failures, ForwardCached: fs.Cached,
		RRLLimited: s.RRLLimited(), AXFR: ts.AXFR, IXFR: ts.IXFR, UpToDate: ts.UpToDate, Refused: ts.Refused,
		Propagation: s.PropagationHistograms()}
	for _, n := range s.NotifyStatus() {
		if n.Pending {
			m.NotifyPending++
		}
	}
	return m
}

// Uptime is how long the listeners have been up.
func (s *Server) Uptime() time.Duration {
	if !s.Listening() {
		return 0
	}
	return time.Since(s.started)
}
