package status

import (
	"cmp"
	"slices"
	"time"
)

// Member statuses of a service's self-removal hysteresis.
const (
	MemberUp      = "up"      // listed; its status is up
	MemberPending = "pending" // asked to leave; still listed until its turn
	MemberLeft    = "left"    // left by self-removal: not listed
)

// Service is a service's self-removal hysteresis (RFD 1): GET /services
// and GET /services/:owner/:name. The hysteresis computes it; the read
// model adds the names operators know (Login and the aliases).
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
	MemberTimes
}

// MemberTimes are a member's way out of a service, as the hysteresis
// records it (and stores it in this form).
type MemberTimes struct {
	// DownSince is when a pending or departed member's status went down,
	// as far as cns knows: for a member cns never saw up, when cns first
	// saw it down (FirstSeenDown).
	DownSince time.Time `json:"down_since,omitzero"`
	// FirstSeenDown is set for a member cns never saw up: its status was
	// already down when it joined the service (or when cns first saw it),
	// at this time; when it went down, cns cannot tell.
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

// HasPending reports whether a member of the service waits to leave.
func (v *Service) HasPending() bool {
	return slices.ContainsFunc(v.Members, func(m ServiceMember) bool { return m.Status == MemberPending })
}

// MembersByAlias returns the members ordered as an operator looks for
// them: by alias, then by UUID.
func (v *Service) MembersByAlias() []ServiceMember {
	out := slices.Clone(v.Members)
	slices.SortStableFunc(out, func(a, b ServiceMember) int {
		return cmp.Or(cmp.Compare(a.Alias, b.Alias), cmp.Compare(a.VM, b.VM))
	})
	return out
}
