// Package hysteresis is RFD 1's self-removal hysteresis: the policy that
// lets the members of a service take themselves out of it (metadata
// triton.cns.status=down) without a faulty health check emptying the
// service in one sweep. The reference implementation never built it.
//
// The rules, per service (an owner's service name; the same name in two
// accounts is two services):
//
//   - At most max(floor(n/3), 1) members leave by self-removal in any
//     Window (default 60 s).
//   - The last listed member leaves only once it has been down for
//     LastMemberDelay (default 600 s).
//   - A member waiting for its turn stays listed; one whose status comes
//     back up before its turn is simply kept. Members leave in the order
//     they asked to (then by VM UUID).
//   - Hard removals (VM stopped or destroyed, disable tag, service tag
//     removed, owner flag off, CN down) bypass all this: the member is
//     dropped at once and stops counting.
//
// n, precisely: the window slides; at time t it is (t−Window, t]. n is the
// size the service had when that window opened: the members listed now
// (up, or down and still waiting) plus the members that left by
// self-removal within the window and are still down. A member
// hard-removed since no longer counts; one that joined counts at once; a
// member that left and came back counts once. The budget is spent by
// every self-removal within the window, whoever it was.
//
// The package is pure: Apply takes a service's state, what was observed
// and the time, changes the state and returns the decisions. No I/O, no
// clock; the state encodes to JSON for the store, and View is the read
// shape the admin API serves (admin/status).
package hysteresis

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tritondatacenter/cns/admin/status"
)

// Defaults of RFD 1 ("these exact numbers are subject to change").
const (
	DefaultWindow          = 60 * time.Second
	DefaultLastMemberDelay = 600 * time.Second
)

// HistoryLength is how many decisions a service keeps.
const HistoryLength = 50

// Policy holds the two numbers of the rules. Zero fields take the
// defaults.
type Policy struct {
	Window          time.Duration
	LastMemberDelay time.Duration
}

func (p Policy) normal() Policy {
	if p.Window <= 0 {
		p.Window = DefaultWindow
	}
	if p.LastMemberDelay <= 0 {
		p.LastMemberDelay = DefaultLastMemberDelay
	}
	return p
}

// Status is where a member stands.
type Status string

const (
	Up      Status = "up"      // listed; its status is up
	Pending Status = "pending" // asked to leave; still listed until its turn
	Left    Status = "left"    // left by self-removal (or was down when it joined): not listed
)

// Member is one VM of a service whose status is down (in the views, any
// member): its status, and its way out (the times the API shows).
type Member struct {
	Status Status `json:"status"`
	status.MemberTimes
}

// Departure is one self-removal, which spends the window's budget.
type Departure struct {
	VM string    `json:"vm"`
	At time.Time `json:"at"`
}

// Service is the hysteresis state of one service. Most members of most
// services are up, so those are only a set: a data center's worth of
// members stays a few MB.
type Service struct {
	Owner string `json:"owner_uuid"`
	Name  string `json:"service"`
	// Up are the members listed with their status up.
	Up VMSet `json:"up"`
	// Down are the members whose status is down, by VM UUID: pending
	// (still listed) or left.
	Down map[string]*Member `json:"down,omitempty"`
	// Departures are the self-removals of the current window, oldest
	// first.
	Departures []Departure `json:"departures,omitempty"`
	// NextCheck is when a pending member may next be let go; zero when no
	// member is pending. The updater wakes up then.
	NextCheck time.Time  `json:"next_check,omitzero"`
	History   []Decision `json:"history,omitempty"`
}

// Key names the service of owner called name, in the store and in the
// updater's maps.
func Key(owner, name string) string { return owner + "/" + name }

// NewService returns the empty state of owner's service name.
func NewService(owner, name string) *Service {
	return &Service{Owner: owner, Name: name, Up: VMSet{}, Down: map[string]*Member{}}
}

// VMSet is a set of VM UUIDs, a sorted list in JSON.
type VMSet map[string]struct{}

// MarshalJSON writes the set as a sorted list.
func (v VMSet) MarshalJSON() ([]byte, error) {
	return json.Marshal(slices.Sorted(maps.Keys(v)))
}

// UnmarshalJSON reads a list.
func (v *VMSet) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*v = make(VMSet, len(list))
	for _, vm := range list {
		(*v)[vm] = struct{}{}
	}
	return nil
}

// Has reports whether vm is a member, whatever its status.
func (s *Service) Has(vm string) bool {
	_, up := s.Up[vm]
	return up || s.Down[vm] != nil
}

// Empty reports whether the service has no members left.
func (s *Service) Empty() bool { return len(s.Up) == 0 && len(s.Down) == 0 }

// Member returns where member vm stands.
func (s *Service) Member(vm string) (Member, bool) {
	if _, up := s.Up[vm]; up {
		return Member{Status: Up}, true
	}
	if m := s.Down[vm]; m != nil {
		return *m, true
	}
	return Member{}, false
}

// Key is the service's key.
func (s *Service) Key() string { return Key(s.Owner, s.Name) }

// Held reports whether vm waits for its turn: it stays listed although
// its status is down.
func (s *Service) Held(vm string) bool {
	m := s.Down[vm]
	return m != nil && m.Status == Pending
}

// Encode is the stored form of the state.
func (s *Service) Encode() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // plain strings, times and maps: cannot fail
	}
	return b
}

// Decode reads a stored state.
func Decode(b []byte) (*Service, error) {
	var s Service
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	if s.Up == nil {
		s.Up = VMSet{}
	}
	if s.Down == nil {
		s.Down = map[string]*Member{}
	}
	for vm, m := range s.Down {
		if m == nil || (m.Status != Pending && m.Status != Left) {
			delete(s.Down, vm)
			continue
		}
		// A state written before FirstSeenDown existed: a member that
		// left without a departure is one that was down when it joined,
		// and its DownSince is when cns first saw it.
		if m.Status == Left && m.LeftAt.IsZero() && m.FirstSeenDown.IsZero() {
			m.FirstSeenDown = m.DownSince
		}
	}
	return &s, nil
}

// Observed is what the updater saw of a VM with respect to one service.
type Observed uint8

const (
	// Listable: the VM belongs in the service and its status is up.
	Listable Observed = iota + 1
	// Down: the VM would be listed but its triton.cns.status is down, a
	// self-removal.
	Down
	// Removed: the VM is out of the service for a hard reason (stopped,
	// destroyed, disabled, tag removed, owner flag off, CN down).
	Removed
)

// Change is one observation of one VM.
type Change struct {
	VM string
	Is Observed
	// Reason says why a Removed member went, for the history.
	Reason string
}

// Action is what a decision did.
type Action string

const (
	ActionPending     Action = "pending"      // asked to leave; stays listed for now
	ActionReleased    Action = "released"     // left the service's names
	ActionKept        Action = "kept"         // status up again before its turn: stays
	ActionRejoined    Action = "rejoined"     // status up again after it had left
	ActionHardRemoved Action = "hard-removed" // out at once, whatever the hysteresis said
)

// Decision is one entry of a service's history, and of the log.
type Decision struct {
	Time   time.Time `json:"time"`
	VM     string    `json:"vm"`
	Action Action    `json:"action"`
	Reason string    `json:"reason,omitempty"`
}

// Apply folds changes into s at time now, lets go the pending members
// whose turn has come, and returns the decisions made, which are also
// appended to s.History. changed reports whether s differs from before
// (and must be stored). Apply with no changes at or after s.NextCheck is
// the timer's turn.
func (p Policy) Apply(s *Service, changes []Change, now time.Time) (decisions []Decision, changed bool) {
	p = p.normal()
	changed = s.distrustFuture(p, now)
	hadPending := !s.NextCheck.IsZero()
	var waiting []string // members that asked to leave in this call
	for _, c := range changes {
		d, ch, asked := s.observe(c, now)
		changed = changed || ch
		if d != nil {
			decisions = append(decisions, *d)
		}
		if asked {
			waiting = append(waiting, c.VM)
		}
	}
	due := hadPending && !now.Before(s.NextCheck)
	if len(waiting) > 0 || (hadPending && (changed || due)) {
		released := p.release(s, now)
		decisions = append(decisions, released...)
		p.schedule(s, now)
		for _, vm := range waiting {
			if m := s.Down[vm]; m != nil && m.Status == Pending {
				_, why := p.mayLeave(s, m, now)
				decisions = append(decisions, Decision{Time: now, VM: vm, Action: ActionPending, Reason: why})
			}
		}
		changed = true
	}
	s.remember(decisions)
	return decisions, changed
}

// distrustFuture brings stored times that lie after now back to now:
// they were written by a run whose clock was ahead (the system clock
// stepped back while cns was stopped), and taken at face value they would
// hold members for the size of the step on top of the window. A check
// due later than any window could make it is due now (and rescheduled).
// A clock stepped forward while cns was stopped cannot be told from
// downtime: windows then end early by at most their length.
func (s *Service) distrustFuture(p Policy, now time.Time) bool {
	changed := false
	clamp := func(t *time.Time) {
		if t.After(now) {
			*t, changed = now, true
		}
	}
	for _, m := range s.Down {
		clamp(&m.DownSince)
		clamp(&m.FirstSeenDown)
		clamp(&m.LeftAt)
	}
	for i := range s.Departures {
		clamp(&s.Departures[i].At)
	}
	if s.NextCheck.After(now.Add(p.Window + p.LastMemberDelay)) {
		s.NextCheck, changed = now, true
	}
	return changed
}

// observe applies one change. It returns the decision it makes (if any),
// whether s changed, and whether the VM just asked to leave.
func (s *Service) observe(c Change, now time.Time) (d *Decision, changed, asked bool) {
	_, up := s.Up[c.VM]
	m := s.Down[c.VM]
	decide := func(a Action, why string) *Decision {
		return &Decision{Time: now, VM: c.VM, Action: a, Reason: why}
	}
	switch c.Is {
	case Removed:
		switch {
		case up:
			delete(s.Up, c.VM)
			return decide(ActionHardRemoved, c.Reason), true, false
		case m == nil:
			return nil, false, false
		}
		delete(s.Down, c.VM)
		if m.Status == Left {
			return nil, true, false // was not listed: nothing to say
		}
		return decide(ActionHardRemoved, c.Reason+" (was waiting to leave)"), true, false
	case Listable:
		if up {
			return nil, false, false
		}
		delete(s.Down, c.VM)
		s.Up[c.VM] = struct{}{}
		switch {
		case m == nil:
			return nil, true, false
		case m.Status == Pending:
			return decide(ActionKept, "status up again before its turn"), true, false
		}
		return decide(ActionRejoined, "status up again"), true, false
	case Down:
		switch {
		case up:
			delete(s.Up, c.VM)
			s.Down[c.VM] = &Member{Status: Pending, MemberTimes: status.MemberTimes{DownSince: now}}
			return nil, true, true
		case m == nil:
			// Never listed here (it was down when it joined): nothing to
			// hold, it simply is not listed. It went down before cns saw
			// it, when, cns cannot tell.
			s.Down[c.VM] = &Member{Status: Left, MemberTimes: status.MemberTimes{DownSince: now, FirstSeenDown: now}}
			return nil, true, false
		}
	}
	return nil, false, false
}

// release lets go, in order, the pending members whose turn has come.
func (p Policy) release(s *Service, now time.Time) []Decision {
	s.expire(now, p.Window)
	listed, n := s.size()
	var out []Decision
	for _, vm := range s.queue() {
		m := s.Down[vm]
		ok, why := p.allows(listed, n, len(s.Departures), m.DownSince, now)
		if !ok {
			break
		}
		m.Status, m.LeftAt, m.MayLeaveAt = Left, now, time.Time{}
		s.Departures = append(s.Departures, Departure{VM: vm, At: now})
		out = append(out, Decision{Time: now, VM: vm, Action: ActionReleased, Reason: why})
		listed-- // and n stays: it left within the window and is down
	}
	return out
}

// mayLeave says whether pending member m may leave now, and why (not).
// s.Departures must hold only the current window's.
func (p Policy) mayLeave(s *Service, m *Member, now time.Time) (bool, string) {
	listed, n := s.size()
	return p.allows(listed, n, len(s.Departures), m.DownSince, now)
}

// allows is the rule for the head of the queue, down since downSince,
// with listed members, the window's n and used self-removals.
func (p Policy) allows(listed, n, used int, downSince, now time.Time) (bool, string) {
	budget := max(n/3, 1)
	if used >= budget {
		return false, fmt.Sprintf("window budget spent: %d of %d self-removals (n=%d) in the last %s", used, budget, n, p.Window)
	}
	if listed == 1 {
		if now.Before(downSince.Add(p.LastMemberDelay)) {
			return false, fmt.Sprintf("last listed member: leaves %s after its status went down", p.LastMemberDelay)
		}
		return true, fmt.Sprintf("last listed member, down for %s", now.Sub(downSince))
	}
	return true, fmt.Sprintf("self-removal %d of %d (n=%d) in the last %s", used+1, budget, n, p.Window)
}

// size counts the listed members and n (see the package comment).
func (s *Service) size() (listed, n int) {
	listed = len(s.Up)
	for _, m := range s.Down {
		if m.Status == Pending {
			listed++
		}
	}
	departed := map[string]bool{}
	for _, d := range s.Departures {
		if m := s.Down[d.VM]; m != nil && m.Status == Left {
			departed[d.VM] = true
		}
	}
	return listed, listed + len(departed)
}

// expire forgets the departures that left the window.
func (s *Service) expire(now time.Time, window time.Duration) {
	i := 0
	for i < len(s.Departures) && !now.Before(s.Departures[i].At.Add(window)) {
		i++
	}
	s.Departures = slices.Delete(s.Departures, 0, i)
}

// queue returns the pending members in the order they leave: first down,
// first out; ties by VM UUID.
func (s *Service) queue() []string {
	var q []string
	for vm, m := range s.Down {
		if m.Status == Pending {
			q = append(q, vm)
		}
	}
	slices.SortFunc(q, func(a, b string) int {
		return cmp.Or(s.Down[a].DownSince.Compare(s.Down[b].DownSince), cmp.Compare(a, b))
	})
	return q
}

// schedule sets s.NextCheck, the first time after now at which a pending
// member may leave (zero when none is pending), and every pending
// member's MayLeaveAt, by playing the rules forward as if nothing else
// changed. It runs after release, so the head of the queue is blocked
// now: by the budget (until the oldest departure leaves the window) or by
// the last-member delay. Counters keep it linear in the queue and the
// window.
func (p Policy) schedule(s *Service, now time.Time) {
	q := s.queue()
	s.NextCheck = time.Time{}
	if len(q) == 0 {
		return
	}
	f := newForecast(s)
	t := now
	for i := 0; i < len(q); {
		next := f.nextEvent(p, s.Down[q[i]].DownSince, t)
		if next.IsZero() {
			next = t.Add(p.Window) // cannot happen; never stall a pending member
		}
		if s.NextCheck.IsZero() {
			s.NextCheck = next
		}
		t = next
		f.expire(t, p.Window)
		for ; i < len(q); i++ {
			m := s.Down[q[i]]
			if ok, _ := p.allows(f.listed, f.n(), len(f.deps), m.DownSince, t); !ok {
				break
			}
			m.MayLeaveAt = t
			f.leave(q[i], t)
		}
	}
}

// forecast is a service's counts, played forward by schedule.
type forecast struct {
	listed   int
	deps     []Departure
	inWindow map[string]int  // departures per VM within the window
	left     map[string]bool // members down and out
	departed int             // VMs with departures in the window that are out: the rest of n
}

func newForecast(s *Service) *forecast {
	f := &forecast{listed: len(s.Up), deps: slices.Clone(s.Departures), inWindow: map[string]int{}, left: map[string]bool{}}
	for vm, m := range s.Down {
		if m.Status == Left {
			f.left[vm] = true
		} else {
			f.listed++
		}
	}
	for _, d := range f.deps {
		f.inWindow[d.VM]++
		if f.inWindow[d.VM] == 1 && f.left[d.VM] {
			f.departed++
		}
	}
	return f
}

func (f *forecast) n() int { return f.listed + f.departed }

// nextEvent is the first time after t at which the head, down since
// downSince, could be let go.
func (f *forecast) nextEvent(p Policy, downSince, t time.Time) time.Time {
	var next time.Time
	earlier := func(c time.Time) {
		if c.After(t) && (next.IsZero() || c.Before(next)) {
			next = c
		}
	}
	if len(f.deps) > 0 && len(f.deps) >= max(f.n()/3, 1) {
		earlier(f.deps[0].At.Add(p.Window))
	}
	if f.listed == 1 {
		earlier(downSince.Add(p.LastMemberDelay))
	}
	return next
}

func (f *forecast) expire(t time.Time, window time.Duration) {
	for len(f.deps) > 0 && !t.Before(f.deps[0].At.Add(window)) {
		vm := f.deps[0].VM
		f.deps = f.deps[1:]
		if f.inWindow[vm]--; f.inWindow[vm] == 0 && f.left[vm] {
			f.departed--
		}
	}
}

func (f *forecast) leave(vm string, t time.Time) {
	f.deps = append(f.deps, Departure{VM: vm, At: t})
	f.listed--
	f.left[vm] = true
	f.inWindow[vm]++
	f.departed++ // it was listed, so not counted yet
}

// remember appends decisions to the history, keeping the last
// HistoryLength.
func (s *Service) remember(ds []Decision) {
	if len(ds) == 0 {
		return
	}
	s.History = append(s.History, ds...)
	if over := len(s.History) - HistoryLength; over > 0 {
		s.History = slices.Delete(s.History, 0, over)
	}
}

// View describes s at now without changing it, as the admin API and the
// terminal UI show it (without the names the read model adds: the
// owner's login, the VMs' aliases).
func (p Policy) View(s *Service, now time.Time) status.Service {
	p = p.normal()
	c := &Service{Up: s.Up, Down: s.Down, Departures: slices.Clone(s.Departures)}
	c.expire(now, p.Window)
	listed, n := c.size()
	v := status.Service{Owner: s.Owner, Service: s.Name, Listed: listed, N: n, Budget: max(n/3, 1), NextCheck: s.NextCheck,
		Members: make([]status.ServiceMember, 0, len(s.Up)+len(s.Down)), Departures: []status.Departure{}, History: []status.Decision{}}
	v.BudgetLeft = max(v.Budget-len(c.Departures), 0)
	if len(c.Departures) > 0 {
		v.WindowFreesAt = c.Departures[0].At.Add(p.Window)
	}
	for vm := range s.Up {
		v.Members = append(v.Members, status.ServiceMember{VM: vm, Status: string(Up)})
	}
	for vm, m := range s.Down {
		v.Members = append(v.Members, status.ServiceMember{VM: vm, Status: string(m.Status), MemberTimes: m.MemberTimes})
	}
	slices.SortFunc(v.Members, func(a, b status.ServiceMember) int { return cmp.Compare(a.VM, b.VM) })
	for _, d := range c.Departures {
		v.Departures = append(v.Departures, status.Departure{VM: d.VM, At: d.At})
	}
	for _, d := range s.History {
		v.History = append(v.History, status.Decision{Time: d.Time, VM: d.VM, Action: string(d.Action), Reason: d.Reason})
	}
	return v
}
