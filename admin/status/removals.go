package status

import "time"

// RemovalGuard is the guard on mass removals: what it holds now, its
// thresholds and its latest events (GET /status, GET /feeds).
type RemovalGuard struct {
	// Holds are the causes whose removals are held (or being applied);
	// empty when nothing is held.
	Holds []RemovalHold `json:"holds"`
	// The policy: removals of one cause within the window hold when
	// they are more than MinVMs and more than Percent of the VMs
	// stored; a hold applies after ConfirmSeconds with fresh data.
	WindowSeconds  float64        `json:"window_seconds"`
	MinVMs         int            `json:"min_vms"`
	Percent        int            `json:"percent"`
	ConfirmSeconds float64        `json:"confirm_seconds"`
	History        []RemovalEvent `json:"history,omitempty"`
}

// RemovalHold is one cause's hold.
type RemovalHold struct {
	Cause string `json:"cause"` // cn_down, unlisted, owner_off
	// Phase: holding (the period runs), confirming (waiting for the
	// upstream to answer again) or applying (the held removals go
	// through as their VMs are computed again).
	Phase string    `json:"phase"`
	Since time.Time `json:"since"`
	VMs   int       `json:"vms"`  // held now
	Peak  int       `json:"peak"` // most held at once
	Of    int       `json:"of"`   // VMs stored when the hold began
	// ConfirmAt: the earliest the held removals apply by themselves, at
	// the upstream's first answer after it.
	ConfirmAt time.Time `json:"confirm_at"`
	What      string    `json:"what"`     // the cause in words
	Upstream  string    `json:"upstream"` // whose answers confirm it
	// UpstreamAnswered is when the upstream last answered.
	UpstreamAnswered time.Time `json:"upstream_answered,omitzero"`
}

// RemovalEvent is one entry of the guard's history.
type RemovalEvent struct {
	Time   time.Time `json:"time"`
	Cause  string    `json:"cause"`
	Action string    `json:"action"` // held, confirmed, accepted, released, yielded
	VMs    int       `json:"vms"`
	Of     int       `json:"of"`
	Left   int       `json:"left,omitempty"` // released: still over, applied as ordinary removals
}
