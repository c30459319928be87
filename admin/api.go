// Package admin is cns's REST API (the reference implementation's
// endpoints, same paths and JSON, plus new ones), its Go client, and the
// read model an operator's view reads (live through the API, or from a db
// file). cnsadm is built on it (admin/cnsadm), and so is the terminal UI.
package admin

import (
	"time"

	"github.com/tritondatacenter/cns/admin/status"
)

// The JSON shapes of the API. Reference endpoints keep the reference's
// field names; new fields are only ever added. The shapes a part of cns
// reports about itself (propagation, peers, services, feeds, aggregated
// sources) are defined once, in admin/status, returned by the part that
// knows them and served as they are; admin names them here. The rest are
// admin's own, computed by the read model from the store.

// The read shapes of admin/status, under the API's names.
type (
	ZoneSummary     = status.ZoneSummary
	AllowedPeer     = status.AllowedPeer
	Peer            = status.Peer
	PeerZone        = status.PeerZone
	ZoneTracking    = status.ZoneTracking
	Propagation     = status.Propagation
	PeerPropagation = status.PeerPropagation
	Service         = status.Service
	ServiceMember   = status.ServiceMember
	MemberTimes     = status.MemberTimes
	Departure       = status.Departure
	Decision        = status.Decision
	FeedStatus      = status.Feed
	AggregateSource = status.AggregateSource
	RemovalGuard    = status.RemovalGuard
	RemovalHold     = status.RemovalHold
	RemovalEvent    = status.RemovalEvent
)

// Propagation states of a serial, and of one peer for a serial; member
// statuses of a service's hysteresis.
const (
	StatePending  = status.StatePending
	StateActive   = status.StateActive
	StateError    = status.StateError
	MemberUp      = status.MemberUp
	MemberPending = status.MemberPending
	MemberLeft    = status.MemberLeft
)

// Error is the restify-style error body: {"code": ..., "message": ...}.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Status  int    `json:"-"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// VM is GET /vm/:uuid.
type VM struct {
	UUID string `json:"uuid"`
	// Names are the FQDNs whose TXT is the VM's UUID: its instance names
	// and listed service names (what CloudAPI shows as dns_names). For a
	// compute node, its CMON names.
	Names []string `json:"names"`
	// LastVisit is when a feed last saw the VM (a listing or a change),
	// in ms since the epoch; read from a db file, it may be up to
	// feeds.LastSeenSaveEvery older.
	LastVisit int64 `json:"last_visit"`
	// ComputeNode marks a compute node (a CNAPI server), which has only
	// its <server_uuid>.cmon names.
	ComputeNode bool `json:"compute_node,omitempty"`
	// Added by cns: the listing decision and its reasons.
	Alias        string   `json:"alias,omitempty"`
	Owner        string   `json:"owner_uuid,omitempty"`
	Login        string   `json:"login,omitempty"`
	Server       string   `json:"server_uuid,omitempty"`
	State        string   `json:"state,omitempty"`
	ListInstance bool     `json:"list_instance"`
	ListServices bool     `json:"list_services"`
	Reasons      []string `json:"reasons"`
	Services     []string `json:"services,omitempty"`
	Problems     []string `json:"problems,omitempty"`
	// Records are every record the VM contributes, in zone file text.
	Records []string `json:"records,omitempty"`
	// With client_answers: the addresses that identify the VM when it
	// asks cns, and the owner-less short names its owner's instances can
	// use for it (self.inst.<zone> for itself).
	ClientAddrs []string `json:"client_addrs,omitempty"`
	ShortNames  []string `json:"short_names,omitempty"`
}

// PeerSummary is one entry of GET /peers.
type PeerSummary struct {
	Address string            `json:"address"`
	Serials map[string]uint32 `json:"serials"`
	Version string            `json:"version,omitempty"`
}

// Zone is GET /zones/:zone.
type Zone struct {
	Name       string     `json:"name"`
	Serial     uint32     `json:"serial"`
	Reverse    bool       `json:"reverse"`
	Names      int        `json:"names"`
	Records    int        `json:"records"`
	LastChange time.Time  `json:"last_change"`
	Journal    Journal    `json:"journal"`
	Peers      []ZonePeer `json:"peers"`
	// Propagation is how far the newest serial has spread to the peers.
	Propagation *Propagation `json:"propagation,omitempty"`
}

// Journal is a zone's IXFR history.
type Journal struct {
	From    uint32 `json:"from"` // oldest serial an IXFR can start from (0: none)
	Entries int    `json:"entries"`
	Bytes   int64  `json:"bytes"`
}

// ZonePeer is one secondary of a zone.
type ZonePeer struct {
	Address      string  `json:"address"`
	Serial       uint32  `json:"serial"`
	DriftSerials int64   `json:"drift_serials"`
	DriftSeconds float64 `json:"drift_seconds"`
	Version      string  `json:"version,omitempty"`
}

// Records is GET /zones/:zone/records.
type Records struct {
	Zone    string   `json:"zone"`
	Serial  uint32   `json:"serial"`
	Records []string `json:"records"`
	// Next is the name to pass as ?after= for the next page ("" at the end).
	Next string `json:"next,omitempty"`
}

// Change is one serial of GET /zones/:zone/history.
type Change struct {
	From    uint32    `json:"from"`
	To      uint32    `json:"to"`
	Time    time.Time `json:"time"`
	Cause   string    `json:"cause"`
	Deleted []string  `json:"deleted"`
	Added   []string  `json:"added"`
}

// SuffixesRequest is the body of POST /suffixes-for-vm.
type SuffixesRequest struct {
	OwnerUUID string   `json:"owner_uuid"`
	Networks  []string `json:"networks"`
}

// Suffixes answers POST /suffixes-for-vm.
type Suffixes struct {
	Suffixes []string `json:"suffixes"`
}

// Feeds is GET /feeds.
type Feeds struct {
	Feeds      []FeedStatus `json:"feeds"`
	Pending    int          `json:"pending"` // VMs waiting for the next commit
	LastCommit *Commit      `json:"last_commit,omitempty"`
	// Sources are the zones an aggregator follows (absent: none).
	Sources []AggregateSource `json:"sources,omitempty"`
	// RemovalGuard is the guard on mass removals (absent: no feed).
	RemovalGuard *RemovalGuard `json:"removal_guard,omitempty"`
}

// AcceptRemovals is the body of POST /feeds/accept: the cause whose held
// removals to apply (empty: every cause).
type AcceptRemovals struct {
	Cause string `json:"cause,omitempty"`
}

// RemovalsAccepted answers POST /feeds/accept.
type RemovalsAccepted struct {
	// Applied is how many VMs' held removals go through now.
	Applied int `json:"applied"`
}

// Commit describes the updater's last commit.
type Commit struct {
	Time       time.Time `json:"time"`
	VMs        int       `json:"vms"`
	DurationMS float64   `json:"duration_ms"`
	// OldestChangeMS: how long the commit's oldest VM change had waited
	// when it was served, from cns learning of it (absent: no VM).
	OldestChangeMS float64 `json:"oldest_change_ms,omitempty"`
	Error          string  `json:"error,omitempty"`
}

// Wait is GET /wait: the serial's propagation, and whether it is ACTIVE.
type Wait struct {
	Propagation
	Done bool `json:"done"`
}

// Status is GET /status: everything cnsadm status prints, in one call.
type Status struct {
	Version string               `json:"version"`
	Uptime  float64              `json:"uptime_seconds"`
	Zones   []ZoneSummary        `json:"zones"`
	Changed map[string]time.Time `json:"changed"`
	Peers   []Peer               `json:"peers"`
	// Propagation of each zone's newest serial, by zone.
	Propagation map[string]Propagation `json:"propagation"`
	// Sources are the zones an aggregator follows (absent: none).
	Sources []AggregateSource `json:"sources,omitempty"`
	// RemovalGuard is the guard on mass removals (absent: no feed); a
	// hold is a problem for cnsadm status.
	RemovalGuard *RemovalGuard `json:"removal_guard,omitempty"`
}

// VMSearch is GET /vms?q=&limit=: the stored VMs matching a query.
type VMSearch struct {
	Query string      `json:"query"`
	VMs   []VMSummary `json:"vms"`
	// Truncated says more VMs match than limit let through.
	Truncated bool `json:"truncated"`
}

// VMSummary is one VM of a search: who it is and whether it is listed.
type VMSummary struct {
	UUID         string   `json:"uuid"`
	Alias        string   `json:"alias,omitempty"`
	Owner        string   `json:"owner_uuid,omitempty"`
	Login        string   `json:"login,omitempty"`
	State        string   `json:"state,omitempty"`
	ListInstance bool     `json:"list_instance"`
	ListServices bool     `json:"list_services"`
	Reasons      []string `json:"reasons"`
}
