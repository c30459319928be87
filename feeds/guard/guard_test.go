package guard

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The tests play the guard through time: t0 plus seconds, a data center
// of 2,000 VMs on 20 compute nodes (100 each) and 40 owners (50 each),
// at the default policy. Each step is a batch, the timer (Advance), an
// operator's accept, or a restart (the state encoded and decoded, as the
// store would).

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

const dcVMs = 2000

func vm(i int) string { return fmt.Sprintf("vm%04d", i) }

// cns removes the VMs of compute nodes from..to-1 from their services.
func cns(from, to int) []Removal {
	var out []Removal
	for cn := from; cn < to; cn++ {
		for i := range 100 {
			out = append(out, Removal{VM: vm(cn*100 + i), Cause: CNDown, Group: fmt.Sprintf("cn%02d", cn)})
		}
	}
	return out
}

// oneCN removes n VMs of one compute node from their services.
func oneCN(n int) []Removal {
	var out []Removal
	for i := range n {
		out = append(out, Removal{VM: vm(i), Cause: CNDown, Group: "cn00"})
	}
	return out
}

// oneOwner removes n VMs of one owner (its flag off).
func oneOwner(n int) []Removal {
	var out []Removal
	for i := range n {
		out = append(out, Removal{VM: vm(i), Cause: OwnerOff, Group: "owner00"})
	}
	return out
}

// unlisted removes VMs from..to-1 for a short listing.
func unlisted(from, to int) []Removal { return listing("l0", from, to) }

// listing removes VMs from..to-1 that listing l missed.
func listing(l string, from, to int) []Removal {
	var out []Removal
	for i := from; i < to; i++ {
		out = append(out, Removal{VM: vm(i), Cause: Unlisted, Group: l})
	}
	return out
}

// owners removes the VMs of owners from..to-1 (their flag off).
func owners(from, to int) []Removal {
	var out []Removal
	for o := from; o < to; o++ {
		for i := range 50 {
			out = append(out, Removal{VM: vm(o*50 + i), Cause: OwnerOff, Group: fmt.Sprintf("owner%02d", o)})
		}
	}
	return out
}

func vmsOf(rs []Removal) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.VM)
	}
	return out
}

type kind int

const (
	batch kind = iota
	tick
	accept
	restart
	yield
)

type step struct {
	at       int
	kind     kind
	removals []Removal
	kept     []string
	fresh    map[Cause]int // seconds
	cause    Cause         // accept's
	yield    []string      // yield's: VMs whose names another VM needs
	vms      int           // the store's size (default dcVMs)

	// Expected:
	held   int      // VMs the verdict holds
	apply  int      // VMs it hands back to recompute
	events []string // "cause action vms"
	phases map[Cause]Phase
	// same: the state is as before (nothing to store).
	same bool
}

func play(t *testing.T, p Policy, steps []step) {
	t.Helper()
	g := New()
	for i, st := range steps {
		fresh := map[Cause]time.Time{}
		for c, sec := range st.fresh {
			fresh[c] = at(sec)
		}
		size := st.vms
		if size == 0 {
			size = dcVMs
		}
		var v Verdict
		switch st.kind {
		case batch:
			v = p.Step(g, Batch{Now: at(st.at), VMs: size, Removals: st.removals, Kept: st.kept, Fresh: fresh})
		case tick:
			v = p.Advance(g, at(st.at), fresh)
		case accept:
			var err error
			if v, err = p.Accept(g, st.cause, at(st.at)); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		case yield:
			v = p.Yield(g, st.yield, at(st.at))
		case restart:
			var err error
			if g, err = Decode(g.Encode()); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		if st.same && v.Changed {
			t.Errorf("step %d (at %d s): the state changed", i, st.at)
		}
		if !st.same && st.kind != restart && len(v.Events) > 0 && !v.Changed {
			t.Errorf("step %d (at %d s): events, but the state did not change", i, st.at)
		}
		if len(v.Hold) != st.held {
			t.Errorf("step %d (at %d s): %d VMs held, want %d", i, st.at, len(v.Hold), st.held)
		}
		if len(v.Apply) != st.apply {
			t.Errorf("step %d (at %d s): %d VMs to apply, want %d", i, st.at, len(v.Apply), st.apply)
		}
		var events []string
		for _, e := range v.Events {
			events = append(events, fmt.Sprintf("%s %s %d", e.Cause, e.Action, e.VMs))
		}
		if !slices.Equal(events, st.events) {
			t.Errorf("step %d (at %d s): events %q, want %q", i, st.at, events, st.events)
		}
		for c, want := range st.phases {
			if got := g.Causes[c].Phase; got != want {
				t.Errorf("step %d (at %d s): %s is %s, want %s", i, st.at, c, got, want)
			}
		}
	}
}

func phase(c Cause, p Phase) map[Cause]Phase { return map[Cause]Phase{c: p} }

func TestGuard(t *testing.T) {
	confirm := int(DefaultConfirm / time.Second)
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"one compute node of 20 applies at once", []step{
			{at: 0, removals: cns(0, 1), phases: phase(CNDown, Clear)},
		}},
		{"one compute node holding half the data center applies at once", []step{
			{at: 0, removals: oneCN(1000), vms: 2000, phases: phase(CNDown, Clear)},
		}},
		{"every compute node down is held", []step{
			{at: 0, removals: cns(0, 20), held: 2000, events: []string{"cn_down held 2000"}, phases: phase(CNDown, Holding)},
		}},
		{"every CN down for two minutes, then up: released unapplied", []step{
			{at: 0, removals: cns(0, 20), held: 2000, events: []string{"cn_down held 2000"}},
			{at: 60, kind: tick, fresh: map[Cause]int{CNDown: 60}, phases: phase(CNDown, Holding)},
			{at: 120, kept: vmsOf(cns(0, 20)), events: []string{"cn_down released 2000"}, phases: phase(CNDown, Clear)},
			{at: 130, removals: cns(3, 4), phases: phase(CNDown, Clear)}, // a CN after: ordinary
		}},
		{"an inventory cut to 30 % is held", []step{
			{at: 0, removals: unlisted(600, 2000), held: 1400, events: []string{"unlisted held 1400"}, phases: phase(Unlisted, Holding)},
		}},
		{"a few VMs missing from a listing apply", []step{
			{at: 0, removals: unlisted(0, 30), phases: phase(Unlisted, Clear)},
		}},
		{"listings that each miss a few VMs apply, however many within the window", []step{
			{at: 0, removals: listing("l1", 0, 15), vms: 60},
			{at: 3, removals: listing("l2", 15, 30), vms: 45},
			{at: 6, removals: listing("l3", 30, 40), vms: 30, phases: phase(Unlisted, Clear)},
		}},
		{"one listing's removals in several batches count together", []step{
			{at: 0, removals: listing("l1", 0, 300)},
			{at: 1, removals: listing("l1", 300, 500)}, // 25 %, not over
			{at: 2, removals: append(listing("l2", 500, 510), listing("l1", 510, 520)...), held: 20,
				events: []string{"unlisted held 20"}, phases: phase(Unlisted, Holding)},
		}},
		{"a small data center is never held", []step{
			{at: 0, removals: unlisted(0, 20), vms: 25},
		}},
		{"one owner opting out applies, however big", []step{
			{at: 0, removals: oneOwner(1500), phases: phase(OwnerOff, Clear)},
		}},
		{"every owner off is held", []step{
			{at: 0, removals: owners(0, 40), held: 2000, events: []string{"owner_off held 2000"}},
		}},
		{"CNs going down one after the other trip the guard in the window", []step{
			{at: 0, removals: cns(0, 4)},  // 400: 20 %
			{at: 10, removals: cns(4, 5)}, // 500: 25 %, not over
			{at: 20, removals: cns(5, 6), held: 100, events: []string{"cn_down held 100"}}, // 600: over
			{at: 30, removals: cns(6, 7), held: 100},                                       // joins the hold
		}},
		{"the window slides", []step{
			{at: 0, removals: cns(0, 4)},
			{at: 61, removals: cns(4, 6)}, // the first 400 are out of the window
		}},
		{"a real shrink is confirmed over the period by a fresh listing", []step{
			{at: 0, removals: unlisted(0, 1000), held: 1000, events: []string{"unlisted held 1000"}},
			{at: 300, removals: unlisted(0, 1000), held: 1000, fresh: map[Cause]int{Unlisted: 300}},
			{at: confirm, kind: tick, fresh: map[Cause]int{Unlisted: 300}, phases: phase(Unlisted, Confirming)},
			{at: confirm + 200, kind: tick, fresh: map[Cause]int{Unlisted: confirm + 200}, apply: 1000,
				events: []string{"unlisted confirmed 1000"}, phases: phase(Unlisted, Applying)},
			{at: confirm + 201, removals: unlisted(0, 600), phases: phase(Unlisted, Applying)},
			{at: confirm + 202, removals: unlisted(600, 1000), phases: phase(Unlisted, Clear)},
			{at: confirm + 203, removals: unlisted(1000, 1030)}, // judged afresh, no window left over
		}},
		{"an upstream that stays silent keeps the hold", []step{
			{at: 0, removals: cns(0, 20), held: 2000, events: []string{"cn_down held 2000"}},
			{at: 10 * confirm, kind: tick, fresh: map[Cause]int{CNDown: 5}, phases: phase(CNDown, Confirming)},
			{at: 10*confirm + 1, removals: cns(0, 20), held: 2000},
		}},
		{"an operator accepts early", []step{
			{at: 0, removals: cns(0, 20), held: 2000, events: []string{"cn_down held 2000"}},
			{at: 60, kind: accept, apply: 2000, events: []string{"cn_down accepted 2000"}, phases: phase(CNDown, Applying)},
			{at: 61, removals: cns(0, 20), phases: phase(CNDown, Clear)},
		}},
		{"accepting one cause leaves the other held", []step{
			{at: 0, removals: append(cns(0, 20), unlisted(0, 0)...), held: 2000, events: []string{"cn_down held 2000"}},
			{at: 1, removals: owners(0, 40), held: 2000, events: []string{"owner_off held 2000"}},
			{at: 60, kind: accept, cause: OwnerOff, apply: 2000, events: []string{"owner_off accepted 2000"},
				phases: map[Cause]Phase{CNDown: Holding, OwnerOff: Applying}},
		}},
		{"a hold survives a restart", []step{
			{at: 0, removals: cns(0, 20), held: 2000, events: []string{"cn_down held 2000"}},
			{at: 30, kind: restart, phases: phase(CNDown, Holding)},
			{at: 31, removals: cns(0, 20), held: 2000, same: true},
			{at: 32, same: true},
			{at: confirm + 1, kind: tick, fresh: map[Cause]int{CNDown: confirm + 1}, apply: 2000, events: []string{"cn_down confirmed 2000"}},
			{at: confirm + 2, kind: restart, phases: phase(CNDown, Applying)},
			{at: confirm + 3, removals: cns(0, 20), phases: phase(CNDown, Clear)},
		}},
		{"a partial recovery down to one CN releases the rest as ordinary", []step{
			{at: 0, removals: cns(0, 20), held: 2000, events: []string{"cn_down held 2000"}},
			{at: 60, kept: vmsOf(cns(1, 20)), apply: 100, events: []string{"cn_down released 2000"}, phases: phase(CNDown, Applying)},
			{at: 61, removals: cns(0, 1), phases: phase(CNDown, Clear)},
		}},
		{"a partial recovery still over the threshold keeps holding", []step{
			{at: 0, removals: cns(0, 20), held: 2000, events: []string{"cn_down held 2000"}},
			{at: 60, kept: vmsOf(cns(10, 20)), phases: phase(CNDown, Holding)},
		}},
		{"a held VM whose names another VM needs goes alone", []step{
			{at: 0, removals: unlisted(0, 1000), held: 1000, events: []string{"unlisted held 1000"}},
			{at: 5, kind: yield, yield: []string{vm(5), vm(1500)}, apply: 1, events: []string{"unlisted yielded 1"}, phases: phase(Unlisted, Holding)},
			{at: 6, removals: unlisted(6, 1000), held: 994, same: true},
		}},
		{"VMs on down CNs keep their instance names: none goes", []step{
			{at: 0, removals: cns(0, 20), held: 2000, events: []string{"cn_down held 2000"}},
			{at: 5, kind: yield, yield: []string{vm(5)}, same: true, phases: phase(CNDown, Holding)},
		}},
		{"a hold its VMs all go from ends", []step{
			{at: 0, removals: unlisted(0, 30), vms: 100, held: 30, events: []string{"unlisted held 30"}},
			{at: 5, kind: yield, yield: vmsOf(unlisted(0, 30)), apply: 30, events: []string{"unlisted yielded 30"}, phases: phase(Unlisted, Clear)},
		}},
		{"a hold from a clock that was ahead starts now", []step{
			{at: 2 * confirm, removals: cns(0, 20), held: 2000, events: []string{"cn_down held 2000"}},
			{at: 0, kind: tick, fresh: map[Cause]int{CNDown: 0}, phases: phase(CNDown, Holding)},
			{at: confirm - 1, kind: tick, fresh: map[Cause]int{CNDown: confirm - 1}, phases: phase(CNDown, Holding)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { play(t, Policy{}, tc.steps) })
	}
	t.Run("off", func(t *testing.T) {
		play(t, Policy{Percent: 100}, []step{{at: 0, removals: cns(0, 20)}})
	})
}

func TestAcceptUnknownCause(t *testing.T) {
	if _, err := (Policy{}).Accept(New(), "cosmic_rays", t0); err == nil || !strings.Contains(err.Error(), "cosmic_rays") {
		t.Errorf("Accept of an unknown cause: %v", err)
	}
}

// A stored state that names an unknown cause or phase is read as clear
// for it, and a garbled one is an error.
func TestDecode(t *testing.T) {
	g, err := Decode([]byte(`{"causes":{"cn_down":{"phase":"bogus","held":{"a":"b"}},"martians":{"phase":"holding"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if g.Causes[CNDown].Phase != Clear || len(g.Causes[CNDown].Held) != 0 || g.Causes["martians"] != nil || g.Holding() {
		t.Errorf("decoded %+v", g.Causes)
	}
	if _, err := Decode([]byte(`{"causes":`)); err == nil {
		t.Error("a garbled state decoded")
	}
}
