package serve

import (
	"net/netip"
	"slices"
	"sort"
	"time"
)

// What the admin API reads from a running server. Everything returned is
// a copy.

// ZoneStatus is a served zone.
type ZoneStatus struct {
	Name   string
	Serial uint32
	Warm   bool // answered from memory (else from the store)
}

// Zones lists the served zones by name.
func (s *Server) Zones() []ZoneStatus {
	var out []ZoneStatus
	for _, z := range s.snap.Load().zones {
		out = append(out, ZoneStatus{Name: z.name, Serial: z.serial, Warm: z.names != nil})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Peers lists the secondaries cns knows of, by address.
func (s *Server) Peers() []Peer { return s.peers.list() }

// DeletePeer forgets a peer (its counters and serials); a peer that keeps
// transferring comes back. It reports whether the peer was known.
func (s *Server) DeletePeer(addr netip.Addr) bool { return s.peers.forget(addr) }

// PeersChanged returns a channel closed at the next change of peer state,
// for long polls.
func (s *Server) PeersChanged() <-chan struct{} { return s.peers.changed() }

// AllowedPeer is one entry of the transfer ACL.
type AllowedPeer struct {
	Prefix netip.Prefix
	Zones  []string // nil: every zone
}

// AllowedPeers lists who may transfer what.
func (s *Server) AllowedPeers() []AllowedPeer {
	a := s.access.Load()
	var out []AllowedPeer
	for _, p := range a.AllowTransfer {
		out = append(out, AllowedPeer{Prefix: p})
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
		out = append(out, AllowedPeer{Prefix: netip.PrefixFrom(addr, addr.BitLen()), Zones: slices.Compact(zones)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Prefix.String() < out[j].Prefix.String() })
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

// Uptime is how long the listeners have been up.
func (s *Server) Uptime() time.Duration {
	if !s.Listening() {
		return 0
	}
	return time.Since(s.started)
}
