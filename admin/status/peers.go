package status

import (
	"fmt"
	"strconv"
	"time"
)

// ZoneSummary is one served zone: GET /zones.
type ZoneSummary struct {
	Name   string `json:"name"`
	Serial uint32 `json:"serial"`
}

// AllowedPeer is one entry of the transfer ACL: GET /allowed-peers.
type AllowedPeer struct {
	Address string   `json:"address"`
	Mask    int      `json:"mask"`
	Zones   []string `json:"zones,omitempty"` // cns: nil means every zone
}

// Peer states as the API shows them: a peer the config names, or a
// learned peer that answers cns's NOTIFYs and probes, or one that does
// not (NOTIFYed with backoff, not waited for).
const (
	PeerConfigured = "configured"
	PeerAnswering  = "answering"
	PeerSilent     = "silent"
)

// Peer is one secondary: GET /peer/:addr, and the peers of GET /status.
// The DNS server fills what its tracker knows; the read model derives
// Serials, UsingNotify, UsingIXFR and each zone's drift.
type Peer struct {
	Address        string            `json:"address"`
	Serials        map[string]uint32 `json:"serials"`
	Version        string            `json:"version"`
	NotifyFailures int               `json:"notify_failures"`
	UsingNotify    bool              `json:"using_notify"`
	UsingIXFR      bool              `json:"using_ixfr"`
	Counters       map[string]uint64 `json:"counters"`
	// State (added by cns): PeerConfigured, PeerAnswering or PeerSilent.
	State string `json:"state,omitempty"`
	// Added by cns: per zone detail, drift included.
	Zones map[string]PeerZone `json:"zones,omitempty"`
}

// PeerZone is one peer's state for one zone: what the tracker records,
// and its drift against the zone's serial.
type PeerZone struct {
	ZoneTracking
	ZoneSerial   uint32  `json:"zone_serial"`
	DriftSerials int64   `json:"drift_serials"` // commits it is behind (RFC 1982 difference)
	DriftSeconds float64 `json:"drift_seconds"` // since the first change it lacks; -1 unknown
}

// ZoneTracking is what the DNS server's peer tracker records of one peer
// for one zone, and stores in this form.
type ZoneTracking struct {
	// Serial is the newest of cns's serials the peer is known to serve:
	// the serial of its last transfer, or what it answered to an SOA
	// probe; for a signer, the serial it had transferred when its own
	// serial last advanced.
	Serial uint32 `json:"serial"`
	// LastTransfer and LastKind describe the last transfer (AXFR, IXFR,
	// IXFR-SOA when it was up to date).
	LastTransfer time.Time `json:"last_transfer,omitzero"`
	LastKind     string    `json:"last_kind,omitempty"`
	AXFR         uint64    `json:"axfr"`
	IXFR         uint64    `json:"ixfr"`
	// NOTIFY bookkeeping, and the last SOA query cns sent it.
	NotifySerial uint32    `json:"notify_serial,omitempty"`
	NotifySent   time.Time `json:"notify_sent,omitzero"`
	NotifyAcked  time.Time `json:"notify_acked,omitzero"`
	LastSOAQuery time.Time `json:"last_soa_query,omitzero"`
	// Signer marks a DNSSEC-signing secondary (Knot's dnssec-signing,
	// BIND's inline-signing), detected or set in config: it serves cns's
	// Serial under a serial of its own, SignerSerial.
	Signer       bool   `json:"signer,omitempty"`
	SignerSerial uint32 `json:"signer_serial,omitempty"`
}

// SerialText is a peer's serial as cnsadm and the TUI show it: cns's
// serial, and a signer's own after it ("1795486465 (signed 1795486470)").
func (z ZoneTracking) SerialText() string { return SerialText(z.Serial, z.SignerSerial) }

// SerialText is serial as cns's, and a signer's own serial after it
// (signer 0: not a signer).
func SerialText(serial, signer uint32) string {
	if signer == 0 {
		return strconv.FormatUint(uint64(serial), 10)
	}
	return fmt.Sprintf("%d (signed %d)", serial, signer)
}
