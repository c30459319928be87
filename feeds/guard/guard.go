// Package guard is the guard on mass removals: an upstream that answers
// wrongly en masse (CNAPI reporting every compute node down, a VMAPI
// listing that comes back short, UFDS answering every owner with CNS
// off, an inventory file truncated) is held, not believed at once.
//
// Removals are counted by cause, in VMs: a VM that would lose names for
// a cause counts once. Destroys, stops, tag changes and self-removals
// (triton.cns.status, under RFD 1's hysteresis) are confirmed VM by VM
// and never counted. The rules, per cause:
//
//   - Within Window, the removals applied and the ones a batch brings
//     together exceed both MinVMs and Percent of the VMs stored: the
//     batch's removals are held (the VMs keep their names) — unless they
//     all come from one compute node (cn_down) or one account
//     (owner_off), which are never held, whatever the data center's size.
//     Unlisted removals count by listing: a listing that comes back
//     short is one listing, while each of several listings that finds a
//     few VMs gone (destroys the changefeed missed) is believed.
//     The removals the window applied that counted are held too
//     (Recall): a collapse that comes over several batches (CNs reported
//     down poll after poll, a listing's removals committed chunk by
//     chunk) is held whole, as a single drop is, and the names its first
//     batches took come back.
//   - While a cause holds, its further removals join the hold.
//   - A held VM recomputed to anything but that removal (its CN is up
//     again, the listing has it again) leaves the hold; a hold that
//     empties, or no longer exceeds the threshold by itself, is released
//     (what is left applies as ordinary removals).
//   - A held VM whose instance names or PTRs another VM needs (a new VM
//     on its address, or with its alias) is let go alone (Yield).
//   - After Confirm, the first answer from the cause's upstream that is
//     newer than the period's end (Fresh) applies the held removals: the
//     condition persisted. An operator's Accept applies them at once. An
//     upstream that does not answer keeps the hold: failures never
//     remove.
//
// The package is pure: Step and Advance take the state, what a batch
// computed and the time, and return the decisions. No I/O, no clock; the
// state encodes to JSON for the store.
package guard

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Defaults of Policy, chosen so that ordinary operations never trip the
// guard: a compute node going down is exempt whatever its size, an
// account opting out likewise, and the rest of an ordinary day (a few
// VMs missing from a listing because their destroy event was missed,
// two or three CNs of twenty rebooted together) stays under a quarter of
// the data center; a listing or a CNAPI answer that loses more than a
// quarter of it inside a minute is a fault far more often than a fact.
// Confirm spans two of the SDC feed's full listings (five minutes apart)
// and ten of its CNAPI polls, so a fault that lasts a restart of the
// upstream service is held through.
const (
	DefaultWindow  = time.Minute
	DefaultMinVMs  = 20
	DefaultPercent = 25
	DefaultConfirm = 10 * time.Minute
)

// HistoryLength is how many events the guard keeps.
const HistoryLength = 50

// Policy holds the guard's numbers. Zero fields take the defaults.
type Policy struct {
	Window time.Duration
	// MinVMs: removals of one cause within Window hold only when they
	// are more than this many VMs ...
	MinVMs int
	// Percent: ... and more than this percentage of the VMs stored. 100
	// turns the guard off.
	Percent int
	// Confirm is how long a hold lasts before fresh data from the
	// upstream that still says so applies it.
	Confirm time.Duration
}

// Normal returns p with its zero fields set to the defaults.
func (p Policy) Normal() Policy {
	if p.Window <= 0 {
		p.Window = DefaultWindow
	}
	if p.MinVMs <= 0 {
		p.MinVMs = DefaultMinVMs
	}
	if p.Percent <= 0 {
		p.Percent = DefaultPercent
	}
	if p.Confirm <= 0 {
		p.Confirm = DefaultConfirm
	}
	return p
}

// exceeds reports whether n removals of a store of size VMs are over the
// threshold.
func (p Policy) exceeds(n, size int) bool {
	return n > p.MinVMs && n*100 > p.Percent*size
}

// Cause is why a VM would lose its names, among the guarded ones.
type Cause string

const (
	// CNDown: its compute node is down by CNAPI's word (out of its
	// services).
	CNDown Cause = "cn_down"
	// Unlisted: missing from a complete listing, VMAPI's or the
	// inventory file's (all its names).
	Unlisted Cause = "unlisted"
	// OwnerOff: its owner's triton_cns_enabled or
	// approved_for_provisioning is off in UFDS (all its names).
	OwnerOff Cause = "owner_off"
)

// Causes are the guarded causes, in the order they are reported.
var Causes = []Cause{CNDown, Unlisted, OwnerOff}

// Text says what a cause means, for the log and cnsadm.
func (c Cause) Text() string {
	switch c {
	case CNDown:
		return "compute nodes reported down by CNAPI"
	case Unlisted:
		return "VMs missing from a complete listing"
	case OwnerOff:
		return "owners reported without CNS by UFDS"
	}
	return string(c)
}

// KeepsInstanceNames reports whether a VM removed for c keeps its
// instance names and its addresses' PTRs: a VM whose compute node is
// down leaves its services only (RFD 1).
func (c Cause) KeepsInstanceNames() bool { return c == CNDown }

// Upstream names the service whose answers confirm a cause.
func (c Cause) Upstream() string {
	switch c {
	case CNDown:
		return "CNAPI"
	case Unlisted:
		return "the listing (VMAPI or the inventory file)"
	case OwnerOff:
		return "UFDS"
	}
	return "the upstream"
}

// Removal is one VM a batch would take names from, for a guarded cause.
type Removal struct {
	VM    string
	Cause Cause
	// Group is the compute node (CNDown) or the owner (OwnerOff) the
	// removal comes from: one group's removals are never held. For
	// Unlisted it is the listing that missed the VM: each listing's
	// removals are counted apart from the others'.
	Group string
}

// Phase is where a cause's hold stands.
type Phase string

const (
	// Clear: nothing held; removals apply, and those of the window are
	// counted.
	Clear Phase = "clear"
	// Holding: over the threshold; the removals are held and the
	// confirmation period runs.
	Holding Phase = "holding"
	// Confirming: the period is over; the next answer of the upstream
	// that still says so applies the held removals.
	Confirming Phase = "confirming"
	// Applying: confirmed, accepted by an operator, or released under
	// the threshold; the held removals go through as their VMs are
	// recomputed.
	Applying Phase = "applying"
)

// Applied is a group's removals applied at one time, within the window.
type Applied struct {
	At    time.Time `json:"at"`
	Group string    `json:"group,omitempty"`
	VMs   int       `json:"vms"`
	// Removed are those VMs, for a hold to recall. They are kept in
	// memory only: a window's worth of a collapse is up to a quarter of
	// the data center, too many to rewrite with every commit of it. After
	// a restart the window counts what it applied before, and recalls
	// what it applies after.
	Removed []string `json:"-"`
}

// State is one cause's state.
type State struct {
	Phase Phase `json:"phase"`
	// Since is when the hold began (zero when Clear).
	Since time.Time `json:"since,omitzero"`
	// Held are the VMs whose removal is held (or, Applying, still to go
	// through), with their group.
	Held map[string]string `json:"held,omitempty"`
	// Peak is the most VMs the hold has held at once.
	Peak int `json:"peak,omitempty"`
	// Of is the VMs stored when the hold began.
	Of int `json:"of,omitempty"`
	// Recent are the removals applied within the window (Clear).
	Recent []Applied `json:"recent,omitempty"`
}

// Action is what an event did.
type Action string

const (
	ActionHeld      Action = "held"      // over the threshold: removals held
	ActionConfirmed Action = "confirmed" // persisted over the period with fresh data: applied
	ActionAccepted  Action = "accepted"  // an operator applied them
	ActionReleased  Action = "released"  // the upstream recovered: the hold ends unapplied
	ActionYielded   Action = "yielded"   // applied, VM by VM, for VMs that need the names they hold
)

// Event is one entry of the guard's history, and of the log.
type Event struct {
	Time   time.Time `json:"time"`
	Cause  Cause     `json:"cause"`
	Action Action    `json:"action"`
	// VMs are the removals the event concerns: held by a batch, or still
	// held when the hold ended.
	VMs int `json:"vms"`
	// Of is the VMs stored then (the relative threshold's base).
	Of int `json:"of"`
	// Window: removals of the cause (Unlisted: of the listing) applied
	// within the window before the batch that tripped the guard.
	Window int `json:"window,omitempty"`
	// Recalled: of those, the ones held again (counted in VMs).
	Recalled int `json:"recalled,omitempty"`
	// Left: released with that many still over (applied as ordinary
	// removals, under the threshold).
	Left int `json:"left,omitempty"`
}

// Guard is the guard's state: each cause's, and the history.
type Guard struct {
	Causes  map[Cause]*State `json:"causes"`
	History []Event          `json:"history,omitempty"`
}

// New returns a guard with nothing held.
func New() *Guard {
	g := &Guard{Causes: map[Cause]*State{}}
	g.normal()
	return g
}

func (g *Guard) normal() {
	if g.Causes == nil {
		g.Causes = map[Cause]*State{}
	}
	for _, c := range Causes {
		s := g.Causes[c]
		if s == nil {
			s = &State{}
			g.Causes[c] = s
		}
		switch s.Phase {
		case Holding, Confirming, Applying:
		default:
			s.Phase, s.Held, s.Since = Clear, nil, time.Time{}
		}
		if s.Held == nil {
			s.Held = map[string]string{}
		}
	}
	for c := range g.Causes {
		if !slices.Contains(Causes, c) {
			delete(g.Causes, c)
		}
	}
}

// Encode is the stored form of the state.
func (g *Guard) Encode() []byte {
	b, err := json.Marshal(g)
	if err != nil {
		panic(err) // strings, times and maps: cannot fail
	}
	return b
}

// Decode reads a stored state.
func Decode(b []byte) (*Guard, error) {
	var g Guard
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, err
	}
	g.normal()
	return &g, nil
}

// Holding reports whether any cause holds removals (or still has held
// ones to apply).
func (g *Guard) Holding() bool {
	for _, s := range g.Causes {
		if len(s.Held) > 0 {
			return true
		}
	}
	return false
}

// HoldsNames reports whether any VM is held whose removal takes its
// instance names (see Yield).
func (g *Guard) HoldsNames() bool {
	for c, s := range g.Causes {
		if !c.KeepsInstanceNames() && len(s.Held) > 0 {
			return true
		}
	}
	return false
}

// Keeps reports whether the guard keeps vm's names, and for which cause:
// its removal is held, and not let go yet (Applying).
func (g *Guard) Keeps(vm string) (Cause, bool) {
	for _, c := range Causes {
		s := g.Causes[c]
		if _, ok := s.Held[vm]; ok && (s.Phase == Holding || s.Phase == Confirming) {
			return c, true
		}
	}
	return "", false
}

// Held reports whether vm's removal is held, and for which cause.
func (g *Guard) Held(vm string) (Cause, bool) {
	for _, c := range Causes {
		if _, ok := g.Causes[c].Held[vm]; ok {
			return c, true
		}
	}
	return "", false
}

// Batch is what one batch computed, as the guard sees it.
type Batch struct {
	Now time.Time
	// VMs is how many VMs the store holds (the relative threshold's base).
	VMs int
	// Removals are the guarded removals the batch computed.
	Removals []Removal
	// Kept are held VMs the batch computed to anything but a guarded
	// removal: their upstream says otherwise now.
	Kept []string
	// Fresh is when each cause's upstream last answered.
	Fresh map[Cause]time.Time
	// Recallable reports whether a VM whose removal the window applied
	// can have its names back (its facts are still known); nil: all.
	Recallable func(vm string) bool
}

// Verdict is what the guard decided.
type Verdict struct {
	// Hold are the VMs whose change stays out of the batch: they keep
	// their names.
	Hold map[string]bool
	// Apply are held VMs to recompute now: their removals go through
	// (a hold confirmed, accepted or released under the threshold).
	Apply []string
	// Recall are VMs whose removal the window applied before a hold
	// began, held now: to compute again as held, so their names come
	// back.
	Recall []string
	// Events are the transitions, also appended to the history.
	Events []Event
	// Changed: the state differs from before (it is to be stored).
	Changed bool
}

func (v *Verdict) event(g *Guard, e Event) {
	v.Events, v.Changed = append(v.Events, e), true
	g.History = append(g.History, e)
	if n := len(g.History) - HistoryLength; n > 0 {
		g.History = slices.Delete(g.History, 0, n)
	}
}

// Step folds a batch into the guard and says which of its removals are
// held. A batch's step changes g whether or not the batch is then stored:
// a batch that failed to store is computed again, and stepping it again
// holds the same VMs (its applied removals only count twice in the
// window, for a window).
func (p Policy) Step(g *Guard, b Batch) Verdict {
	p = p.Normal()
	v := Verdict{Hold: map[string]bool{}}
	p.advance(g, b.Now, b.Fresh, &v)
	byCause := map[Cause][]Removal{}
	for _, r := range b.Removals {
		byCause[r.Cause] = append(byCause[r.Cause], r)
	}
	for _, c := range Causes {
		s := g.Causes[c]
		before := len(s.Held)
		for _, vm := range b.Kept {
			delete(s.Held, vm)
		}
		shrank := len(s.Held) < before
		v.Changed = v.Changed || shrank
		p.step(g, c, s, byCause[c], b, &v)
		p.recovered(g, c, s, shrank, b.Now, b.VMs, &v)
	}
	return v
}

// step applies one cause's removals of a batch.
func (p Policy) step(g *Guard, c Cause, s *State, rs []Removal, b Batch, v *Verdict) {
	var fresh []Removal // not held before
	for _, r := range rs {
		if _, held := s.Held[r.VM]; !held {
			fresh = append(fresh, r)
			continue
		}
		switch s.Phase {
		case Applying:
			delete(s.Held, r.VM) // goes through
			v.Changed = true
		default:
			v.Hold[r.VM] = true
		}
	}
	if len(fresh) == 0 {
		return
	}
	switch s.Phase {
	case Holding, Confirming:
		// The upstream is in doubt: what else it says goes wait too.
		for _, r := range fresh {
			s.Held[r.VM] = r.Group
			v.Hold[r.VM] = true
		}
		s.Peak, v.Changed = max(s.Peak, len(s.Held)), true
		return
	}
	p.expire(s, b.Now)
	window, groups, n := 0, map[string]int{}, map[string]int{}
	for _, a := range s.Recent {
		window += a.VMs
		groups[a.Group] += a.VMs
	}
	for _, r := range fresh {
		groups[r.Group]++
		n[r.Group]++
	}
	counted := window + len(fresh)
	counts := func(string) bool { return true } // the window's groups that count
	if c == Unlisted {
		// One listing counts: the batch's with the most removals, with
		// those its earlier batches applied (a big listing's removals
		// come in chunks), not those of the listings before it, each of
		// which was a complete answer of its own.
		counted, window = 0, 0
		listing := ""
		for _, grp := range slices.Sorted(maps.Keys(n)) {
			if groups[grp] > counted {
				counted, window, listing = groups[grp], groups[grp]-n[grp], grp
			}
		}
		counts = func(grp string) bool { return grp == listing }
	}
	oneGroup := len(groups) == 1 && c != Unlisted
	if s.Phase == Clear && !oneGroup && p.exceeds(counted, b.VMs) {
		s.Phase, s.Since, s.Of = Holding, b.Now, b.VMs
		for _, r := range fresh {
			s.Held[r.VM] = r.Group
			v.Hold[r.VM] = true
		}
		recalled := p.recall(s, b, counts, v)
		s.Peak = len(s.Held)
		v.event(g, Event{Time: b.Now, Cause: c, Action: ActionHeld, VMs: len(s.Held), Of: b.VMs, Window: window, Recalled: recalled})
		return
	}
	// Applied: counted in the window, by group.
	byGroup := map[string][]string{}
	for _, r := range fresh {
		byGroup[r.Group] = append(byGroup[r.Group], r.VM)
	}
	for _, grp := range slices.Sorted(maps.Keys(byGroup)) {
		s.Recent = append(s.Recent, Applied{At: b.Now, Group: grp, VMs: len(byGroup[grp]), Removed: byGroup[grp]})
	}
	v.Changed = true
}

// recall holds the removals the window applied before the batch that
// began the hold of s, of the groups that counted: the collapse is held
// whole. It returns how many VMs it recalled.
func (p Policy) recall(s *State, b Batch, counts func(group string) bool, v *Verdict) int {
	n := 0
	for _, a := range s.Recent {
		if !counts(a.Group) {
			continue
		}
		for _, vm := range a.Removed {
			if _, held := s.Held[vm]; held || b.Recallable != nil && !b.Recallable(vm) {
				continue
			}
			s.Held[vm] = a.Group
			v.Recall = append(v.Recall, vm)
			n++
		}
	}
	s.Recent = nil // (held now)
	return n
}

// recovered ends a hold that emptied (the upstream recovered), or that
// shrank (it recovered in part) until it no longer exceeds the threshold
// by itself: what is left applies as ordinary removals.
func (p Policy) recovered(g *Guard, c Cause, s *State, shrank bool, now time.Time, size int, v *Verdict) {
	switch s.Phase {
	case Applying:
		if len(s.Held) == 0 {
			*s = State{Phase: Clear, Held: map[string]string{}}
			v.Changed = true
		}
		return
	case Clear:
		return
	}
	groups := map[string]bool{}
	for _, grp := range s.Held {
		groups[grp] = true
	}
	left := len(s.Held)
	if left > 0 && (!shrank || p.exceeds(left, size) && !(len(groups) == 1 && c != Unlisted)) {
		return
	}
	v.event(g, Event{Time: now, Cause: c, Action: ActionReleased, VMs: s.Peak, Of: s.Of, Left: left})
	p.apply(s, v)
}

// apply lets the held removals of s go through.
func (p Policy) apply(s *State, v *Verdict) {
	if len(s.Held) == 0 {
		*s = State{Phase: Clear, Held: map[string]string{}}
		return
	}
	s.Phase = Applying
	s.Recent = nil // judged: they do not count against what follows
	for _, vm := range slices.Sorted(maps.Keys(s.Held)) {
		delete(v.Hold, vm)
		v.Apply = append(v.Apply, vm)
	}
}

// expire forgets the removals s applied that are out of the window at
// now (or after now: counted by a run whose clock was ahead).
func (p Policy) expire(s *State, now time.Time) {
	s.Recent = slices.DeleteFunc(s.Recent, func(a Applied) bool { return !a.At.After(now.Add(-p.Window)) || a.At.After(now) })
}

// Counting reports whether any cause counts removals it applied within
// the window (Advance forgets them once it is over).
func (g *Guard) Counting() bool {
	for _, s := range g.Causes {
		if len(s.Recent) > 0 {
			return true
		}
	}
	return false
}

// Advance moves the holds on with time and the upstreams' answers: a
// hold whose period is over is confirming, and one whose upstream
// answered after the period's end is applied; the removals applied that
// the window no longer holds are forgotten. The updater calls it on
// its timer and whenever an upstream answers.
func (p Policy) Advance(g *Guard, now time.Time, fresh map[Cause]time.Time) Verdict {
	p = p.Normal()
	v := Verdict{Hold: map[string]bool{}}
	p.advance(g, now, fresh, &v)
	return v
}

func (p Policy) advance(g *Guard, now time.Time, fresh map[Cause]time.Time, v *Verdict) {
	for _, c := range Causes {
		s := g.Causes[c]
		p.expire(s, now) // (not worth a commit: the stored copy's are out of the window too)
		if s.Since.After(now) {
			s.Since, v.Changed = now, true // written by a run whose clock was ahead
		}
		end := s.Since.Add(p.Confirm)
		switch {
		case s.Phase == Holding && !now.Before(end):
			s.Phase, v.Changed = Confirming, true
			fallthrough
		case s.Phase == Confirming:
			if f := fresh[c]; !f.Before(end) && !f.After(now) {
				v.event(g, Event{Time: now, Cause: c, Action: ActionConfirmed, VMs: len(s.Held), Of: s.Of})
				p.apply(s, v)
			}
		}
	}
}

// Accept applies the held removals of cause (every cause when empty)
// now: an operator's word. It reports an unknown cause as an error.
func (p Policy) Accept(g *Guard, cause Cause, now time.Time) (Verdict, error) {
	v := Verdict{Hold: map[string]bool{}}
	if cause != "" && !slices.Contains(Causes, cause) {
		return v, fmt.Errorf("unknown cause %q (one of %v)", cause, Causes)
	}
	for _, c := range Causes {
		s := g.Causes[c]
		if (cause != "" && c != cause) || (s.Phase != Holding && s.Phase != Confirming) {
			continue
		}
		v.event(g, Event{Time: now, Cause: c, Action: ActionAccepted, VMs: len(s.Held), Of: s.Of})
		p.apply(s, &v)
	}
	return v, nil
}

// Yield lets the held removals of vms go through now, each VM alone:
// another VM, not held, needs an instance name or an address's PTR that
// their records are at (a new VM on a held VM's address, or with a held
// VM's alias). The hold is what keeps them there; that VM's claim is the
// fresher word, and the rest of the hold stands. A VM held for a cause
// whose removal leaves it those names (KeepsInstanceNames) stays held:
// letting it go would free nothing. Apply lists the VMs let go; a hold
// they leave empty ends.
func (p Policy) Yield(g *Guard, vms []string, now time.Time) Verdict {
	v := Verdict{Hold: map[string]bool{}}
	for _, c := range Causes {
		s := g.Causes[c]
		if c.KeepsInstanceNames() || len(s.Held) == 0 {
			continue
		}
		n := 0
		for _, vm := range vms {
			if _, held := s.Held[vm]; held {
				delete(s.Held, vm)
				v.Apply = append(v.Apply, vm)
				n++
			}
		}
		if n == 0 {
			continue
		}
		v.event(g, Event{Time: now, Cause: c, Action: ActionYielded, VMs: n, Of: s.Of})
		if len(s.Held) == 0 {
			*s = State{Phase: Clear, Held: map[string]string{}}
		}
	}
	return v
}

// ConfirmAt is when a held cause's removals may apply at the earliest:
// the end of its period (the next answer of its upstream after it).
func (p Policy) ConfirmAt(s *State) time.Time {
	return s.Since.Add(p.Normal().Confirm)
}
