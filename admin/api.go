// Package admin is cns's REST API (the reference implementation's
// endpoints, same paths and JSON, plus new ones), its Go client, and the
// operations and output of cnsadm built on that client.
package admin

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// The JSON shapes of the API. Reference endpoints keep the reference's
// field names; new fields are only ever added. They are admin's own:
// package main converts the DNS server's types into them in one place
// (admin_source.go) and readmodel.go converts the feeds', so a change
// inside serve or feeds cannot change the API unnoticed.

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

// Peer is GET /peer/:addr.
type Peer struct {
	Address        string            `json:"address"`
	Serials        map[string]uint32 `json:"serials"`
	Version        string            `json:"version"`
	NotifyFailures int               `json:"notify_failures"`
	UsingNotify    bool              `json:"using_notify"`
	UsingIXFR      bool              `json:"using_ixfr"`
	Counters       map[string]uint64 `json:"counters"`
	// State (added by cns): "configured" (the config names it: always
	// NOTIFYed), or a learned peer's "answering" or "silent" (its NOTIFYs
	// go unanswered: NOTIFYed with backoff, not waited for).
	State string `json:"state,omitempty"`
	// Added by cns: per zone detail, drift included.
	Zones map[string]PeerZone `json:"zones,omitempty"`
}

// PeerZone is one peer's state for one zone.
type PeerZone struct {
	Serial       uint32    `json:"serial"`
	ZoneSerial   uint32    `json:"zone_serial"`
	DriftSerials int64     `json:"drift_serials"` // commits it is behind (RFC 1982 difference)
	DriftSeconds float64   `json:"drift_seconds"` // since the first change it lacks; -1 unknown
	LastTransfer time.Time `json:"last_transfer,omitzero"`
	LastKind     string    `json:"last_kind,omitempty"`
	AXFR         uint64    `json:"axfr"`
	IXFR         uint64    `json:"ixfr"`
	NotifySerial uint32    `json:"notify_serial,omitempty"`
	NotifySent   time.Time `json:"notify_sent,omitzero"`
	NotifyAcked  time.Time `json:"notify_acked,omitzero"`
	LastSOAQuery time.Time `json:"last_soa_query,omitzero"`
	// Signer marks a DNSSEC-signing secondary: it serves cns's Serial
	// under a serial of its own, SignerSerial (see "Signing with DNSSEC").
	Signer       bool   `json:"signer,omitempty"`
	SignerSerial uint32 `json:"signer_serial,omitempty"`
}

// SerialText is a peer's serial as cnsadm and the TUI show it: cns's
// serial, and a signer's own after it ("1795486465 (signed 1795486470)").
func (pz PeerZone) SerialText() string { return serialText(pz.Serial, pz.SignerSerial) }

func serialText(serial, signer uint32) string {
	if signer == 0 {
		return strconv.FormatUint(uint64(serial), 10)
	}
	return fmt.Sprintf("%d (signed %d)", serial, signer)
}

// ZoneSummary is one entry of GET /zones.
type ZoneSummary struct {
	Name   string `json:"name"`
	Serial uint32 `json:"serial"`
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

// AllowedPeer is one entry of GET /allowed-peers.
type AllowedPeer struct {
	Address string   `json:"address"`
	Mask    int      `json:"mask"`
	Zones   []string `json:"zones,omitempty"` // cns: nil means every zone
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
}

// AggregateSource is one zone an aggregator follows for a region zone
// (RFD 172), in GET /feeds and GET /status.
type AggregateSource struct {
	Region string `json:"region"`
	Zone   string `json:"zone"`
	// State: ok (at the source's serial), syncing (no copy yet), stale
	// (the source does not answer; its last copy is served), expired
	// (past its SOA expire: its records left the region).
	State        string    `json:"state"`
	Serial       uint32    `json:"serial"`
	LastTransfer time.Time `json:"last_transfer,omitzero"`
	LastKind     string    `json:"last_kind,omitempty"` // IXFR or AXFR
	LastCheck    time.Time `json:"last_check,omitzero"`
	// LagSeconds is how long ago the copy was last confirmed current
	// (-1: never).
	LagSeconds float64 `json:"lag_seconds"`
	Names      int     `json:"names"`
	Skipped    int     `json:"skipped,omitempty"` // names too long under the region
	Error      string  `json:"error,omitempty"`
}

// FeedStatus is one source of truth's health.
type FeedStatus struct {
	Name    string    `json:"name"`
	Healthy bool      `json:"healthy"`
	Since   time.Time `json:"since"`
	Reason  string    `json:"reason,omitempty"`
	LastOK  time.Time `json:"last_ok,omitzero"`
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

// Propagation states of a serial, and of one peer for a serial.
const (
	StatePending = "PENDING"
	StateActive  = "ACTIVE"
	StateError   = "ERROR"
)

// Propagation is how far one serial of a zone has spread to the zone's
// secondaries.
type Propagation struct {
	Zone      string            `json:"zone"`
	Serial    uint32            `json:"serial"`
	State     string            `json:"state"`
	Committed time.Time         `json:"committed"`
	Peers     []PeerPropagation `json:"peers"`
}

// PeerPropagation is one secondary's progress with a serial.
type PeerPropagation struct {
	Address string `json:"address"`
	Serial  uint32 `json:"serial"` // last of cns's serials seen served
	// SignerSerial is a signer's own serial under which it serves Serial.
	SignerSerial uint32  `json:"signer_serial,omitempty"`
	State        string  `json:"state"`
	Seconds      float64 `json:"seconds"` // commit to serving; -1 while pending
	Polls        int     `json:"polls"`
	// Error says why the state is ERROR when it is not the retries
	// running out (a peer holding a serial ahead of cns's).
	Error string `json:"error,omitempty"`
	// Target is where the peer is polled (its NOTIFY address).
	Target netip.AddrPort `json:"target"`
}

// Summary is how cnsadm status and the terminal UI show a serial's
// progress: "ACTIVE", or the state with how many peers serve it
// ("PENDING 1/2").
func (p *Propagation) Summary() string {
	if p.State == StateActive || len(p.Peers) == 0 {
		return p.State
	}
	have := 0
	for _, pp := range p.Peers {
		if pp.State == StateActive {
			have++
		}
	}
	return fmt.Sprintf("%s %d/%d", p.State, have, len(p.Peers))
}

// Member statuses of a service's self-removal hysteresis.
const (
	MemberUp      = "up"      // listed; its status is up
	MemberPending = "pending" // asked to leave; still listed until its turn
	MemberLeft    = "left"    // left by self-removal: not listed
)

// Service is one entry of GET /services and GET /services/:owner/:name:
// a service's self-removal hysteresis.
type Service struct {
	Owner string `json:"owner_uuid"`
	// Login is the owner's login (absent when cns does not know it).
	Login   string `json:"login,omitempty"`
	Service string `json:"service"`
	// Listed counts the members in the service's names (up or pending).
	Listed int `json:"listed"`
	// N is the window's n; Budget is max(floor(N/3), 1) and BudgetLeft
	// what the window's self-removals left of it.
	N          int `json:"n"`
	Budget     int `json:"budget"`
	BudgetLeft int `json:"budget_left"`
	// WindowFreesAt is when the oldest self-removal of the window stops
	// counting (zero when there is none).
	WindowFreesAt time.Time       `json:"window_frees_at,omitzero"`
	NextCheck     time.Time       `json:"next_check,omitzero"`
	Members       []ServiceMember `json:"members"`
	Departures    []Departure     `json:"departures"`
	History       []Decision      `json:"history"`
}

// ServiceMember is one VM of a service.
type ServiceMember struct {
	VM string `json:"vm"`
	// Alias is the VM's alias (absent when it has none, or the VM is no
	// longer stored).
	Alias  string `json:"alias,omitempty"`
	Status string `json:"status"` // MemberUp, MemberPending or MemberLeft
	// DownSince is when a pending or departed member's status went down,
	// as far as cns knows: for a member cns never saw up, when cns first
	// saw it down (FirstSeenDown).
	DownSince time.Time `json:"down_since,omitzero"`
	// FirstSeenDown is set for a member cns never saw up: it was already
	// down when cns first saw it, at this time.
	FirstSeenDown time.Time `json:"first_seen_down,omitzero"`
	// MayLeaveAt is, for a pending member, when it will leave if nothing
	// else changes (zero: not foreseeable).
	MayLeaveAt time.Time `json:"may_leave_at,omitzero"`
	// LeftAt is when a departed member left the service's names.
	LeftAt time.Time `json:"left_at,omitzero"`
}

// Departure is one self-removal, which spends the window's budget.
type Departure struct {
	VM    string    `json:"vm"`
	Alias string    `json:"alias,omitempty"`
	At    time.Time `json:"at"`
}

// Decision is one entry of a service's history.
type Decision struct {
	Time   time.Time `json:"time"`
	VM     string    `json:"vm"`
	Alias  string    `json:"alias,omitempty"`
	Action string    `json:"action"`
	Reason string    `json:"reason,omitempty"`
}
