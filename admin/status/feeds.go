package status

import "time"

// Feed is one source of truth's health: an entry of GET /feeds. The
// updater keeps it in this form.
type Feed struct {
	Name    string    `json:"name"`
	Healthy bool      `json:"healthy"`
	Since   time.Time `json:"since"` // when it became what it is
	Reason  string    `json:"reason,omitempty"`
	// LastOK is when the feed last delivered good data.
	LastOK time.Time `json:"last_ok,omitzero"`
}

// Aggregate source states.
const (
	SourceOK      = "ok"      // at the source's serial
	SourceSyncing = "syncing" // no copy yet
	SourceStale   = "stale"   // the source does not answer; its last copy is served
	SourceExpired = "expired" // past its SOA expire: its records left the region
)

// AggregateSource is one zone an aggregator follows for a region zone
// (RFD 172): GET /feeds and GET /status.
type AggregateSource struct {
	Region       string    `json:"region"`
	Zone         string    `json:"zone"`
	State        string    `json:"state"` // SourceOK, SourceSyncing, SourceStale or SourceExpired
	Serial       uint32    `json:"serial"`
	LastTransfer time.Time `json:"last_transfer,omitzero"` // when a transfer last changed the copy
	LastKind     string    `json:"last_kind,omitempty"`    // IXFR or AXFR
	// LastCheck is when the source was last confirmed at the copy's
	// serial; LagSeconds how long ago that was (-1: never).
	LastCheck  time.Time `json:"last_check,omitzero"`
	LagSeconds float64   `json:"lag_seconds"`
	Names      int       `json:"names"`
	Skipped    int       `json:"skipped,omitempty"` // names too long under the region
	Error      string    `json:"error,omitempty"`
}
