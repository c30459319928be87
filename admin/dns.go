package admin

import (
	"net/netip"
	"time"

	"github.com/tritondatacenter/cns/admin/metrics"
)

// DNS is what the API reads from the running DNS server: *serve.Server,
// which returns the read shapes of admin/status (only main imports serve,
// and hands it over). Everything returned is a copy.
type DNS interface {
	// Listening reports whether the DNS listeners are up; Uptime is how
	// long they have been (0 when they are not).
	Listening() bool
	Uptime() time.Duration
	// Zones are the served zones and their serials, by name.
	Zones() []ZoneSummary
	ZoneSerial(zone string) (uint32, bool)
	// PeerStatus are the secondaries the server tracks, by address, with
	// what the tracker knows: address, version (may be ""), state, NOTIFY
	// failures, counters and, per zone, the serial, transfers and NOTIFY
	// and SOA times. The read model derives the rest (peerView).
	PeerStatus() []Peer
	// DeletePeer forgets a peer; it reports whether the peer was known.
	DeletePeer(addr netip.Addr) bool
	// PeersChanged is closed at the next change of peer state.
	PeersChanged() <-chan struct{}
	// ZonePeers are the addresses expected to serve zone.
	ZonePeers(zone string) []netip.Addr
	// AllowedPeers is the transfer ACL.
	AllowedPeers() []AllowedPeer
	// Propagation is how far serial (0: the newest tracked) of zone has
	// spread; PropagationChanged is closed at the next change of any.
	Propagation(zone string, serial uint32) (Propagation, bool)
	PropagationChanged() <-chan struct{}
	// Metrics are the server's counters.
	Metrics() metrics.DNS
}
