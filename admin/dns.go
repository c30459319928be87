package admin

import (
	"net/netip"
	"time"

	"github.com/tritondatacenter/cns/admin/metrics"
)

// DNS is what the API reads from the running DNS server. Package main
// implements it over serve.Server (admin_source.go): only main imports
// serve, and that file is the one place where serve's types become the
// API's. Everything returned is a copy.
type DNS interface {
	// Listening reports whether the DNS listeners are up; Uptime is how
	// long they have been (0 when they are not).
	Listening() bool
	Uptime() time.Duration
	// Zones are the served zones and their serials, by name.
	Zones() []ZoneSummary
	ZoneSerial(zone string) (uint32, bool)
	// Peers are the secondaries the server tracks, by address, with what
	// the tracker knows: address, version (may be ""), NOTIFY failures,
	// counters and, per zone, the serial, transfers and NOTIFY and SOA
	// times. The read model derives the rest (peerView).
	Peers() []Peer
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
	Metrics() DNSMetrics
}

// DNSMetrics are the DNS server's counters for GET /metrics.
type DNSMetrics struct {
	// AnswersByType and AnswersByRcode count answers per transport
	// ("udp", "tcp") and query type or rcode name.
	AnswersByType  map[string]map[string]uint64
	AnswersByRcode map[string]map[string]uint64
	Dropped        uint64 // requests given no answer
	// Client answers (client_answers): owner-less names answered in the
	// asking instance's scope, and asked by callers identified as no one.
	ClientScoped, ClientUnidentified uint64
	// Forwarded queries (all zero when forwarding is off).
	ForwardHits, ForwardMisses, ForwardFailures uint64
	ForwardCached                               int
	RRLLimited                                  uint64
	// Transfers served, by outcome.
	AXFR, IXFR, UpToDate, Refused uint64
	// NotifyPending counts NOTIFY targets that have not answered for
	// their zone's serial.
	NotifyPending int
	// Propagation holds, per peer (NOTIFY address), the commit-to-serving
	// times (seconds).
	Propagation map[string]metrics.Histogram
}
