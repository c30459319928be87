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
	// recallable: which VMs the updater can give their names back (nil: all).
	recallable func(vm string) bool

	// Expected:
	held   int      // VMs the verdict holds
	apply  int      // VMs it hands back to recompute
	recall int      // VMs the window applied that it holds again
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
			v = p.Step(g, Batch{Now: at(st.at), VMs: size, Removals: st.removals, Kept: st.kept, Fresh: fresh, Recallable: st.recallable})
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
		if len(v.Recall) != st.recall {
			t.Errorf("step %d (at %d s): %d VMs recalled, want %d", i, st.at, len(v.Recall), st.recall)
		}
		for _, vm := range v.Recall {
			if _, held := g.Keeps(vm); !held {
				t.Errorf("step %d (at %d s): %s recalled but not held", i, st.at, vm)
				break
			}
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
		{"one listing's removals in several batches count together, and are held together", []step{
			{at: 0, removals: listing("l1", 0, 300)},
			{at: 1, removals: listing("l1", 300, 500)}, // 25 %, not over
			{at: 2, removals: append(listing("l2", 500, 510), listing("l1", 510, 520)...), held: 20, recall: 500,
				events: []string{"unlisted held 520"}, phases: phase(Unlisted, Holding)},
		}},
		{"a short listing recalls its own removals, not those of the listings before it", []step{
			{at: 0, removals: listing("l1", 0, 400), vms: 2000},   // 20 %: believed
			{at: 1, removals: listing("l2", 400, 700), vms: 1600}, // 18.75 %: believed
			{at: 2, removals: listing("l3", 700, 900), vms: 1300},
			{at: 3, removals: listing("l3", 900, 1100), vms: 1100, held: 200, recall: 200,
				events: []string{"unlisted held 400"}, phases: phase(Unlisted, Holding)}, // 400 of 1,100
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
		{"CNs going down one after the other: the collapse is held whole", []step{
			{at: 0, removals: cns(0, 4)},  // 400: 20 %
			{at: 10, removals: cns(4, 5)}, // 500: 25 %, not over
			{at: 20, removals: cns(5, 6), held: 100, recall: 500, events: []string{"cn_down held 600"}}, // 600: over
			{at: 30, removals: cns(6, 7), held: 100},                                                    // joins the hold
			{at: 40, removals: cns(0, 7), held: 700, same: true},                                        // recalled and held alike
		}},
		{"a listing's removals committed chunk by chunk are held whole", []step{
			{at: 0, removals: unlisted(0, 250)}, // 12.5 % of 2,000
			{at: 1, removals: unlisted(250, 500), vms: 1750, // 500: 28.6 % of what the store holds now
				held: 250, recall: 250, events: []string{"unlisted held 500"}, phases: phase(Unlisted, Holding)},
			{at: 2, removals: unlisted(500, 1400), vms: 1750, held: 900},
		}},
		{"a recalled collapse that recovers is released whole", []step{
			{at: 0, removals: cns(0, 3)},
			{at: 10, removals: cns(3, 6), held: 300, recall: 300, events: []string{"cn_down held 600"}},
			{at: 20, kept: vmsOf(cns(0, 6)), events: []string{"cn_down released 600"}, phases: phase(CNDown, Clear)},
		}},
		{"a recalled collapse accepted applies whole", []step{
			{at: 0, removals: cns(0, 3)},
			{at: 10, removals: cns(3, 6), held: 300, recall: 300, events: []string{"cn_down held 600"}},
			{at: 20, kind: accept, apply: 600, events: []string{"cn_down accepted 600"}, phases: phase(CNDown, Applying)},
		}},
		{"the window slides", []step{
			{at: 0, removals: cns(0, 4)},
			{at: 61, removals: cns(4, 6)}, // the first 400 are out of the window
		}},
		{"only the window's removals are recalled", []step{
			{at: 0, removals: cns(0, 4)},
			{at: 50, removals: cns(4, 5)},
			{at: 70, removals: cns(5, 10), held: 500, recall: 100, events: []string{"cn_down held 600"}}, // 100 + 500 in the window
		}},
		{"a VM whose names cannot come back is not recalled", []step{
			{at: 0, removals: cns(0, 4)},
			{at: 10, removals: cns(4, 6), held: 200, recall: 300, events: []string{"cn_down held 500"},
				recallable: func(id string) bool { return id >= vm(100) }},
		}},
		{"after a restart the window counts what it applied, and recalls what came after", []step{
			{at: 0, removals: cns(0, 3)},
			{at: 5, kind: restart},
			{at: 6, removals: cns(3, 4)},
			{at: 10, removals: cns(4, 6), held: 200, recall: 100, events: []string{"cn_down held 300"}},
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

// The removals a cause applied are forgotten once the window is over,
// with no batch after them: Advance (the updater's timer) lets go of
// the VMs a hold would have recalled.
func TestWindowExpires(t *testing.T) {
	p, g := Policy{}, New()
	p.Step(g, Batch{Now: at(0), VMs: dcVMs, Removals: cns(0, 4)})
	if !g.Counting() || len(g.Causes[CNDown].Recent) == 0 {
		t.Fatal("400 removals applied are not counted in the window")
	}
	p.Advance(g, at(59), nil)
	if !g.Counting() {
		t.Error("forgotten inside the window")
	}
	p.Advance(g, at(60), nil)
	if g.Counting() || len(g.Causes[CNDown].Recent) != 0 {
		t.Errorf("the window is over and the guard counts %+v", g.Causes[CNDown].Recent)
	}
}
