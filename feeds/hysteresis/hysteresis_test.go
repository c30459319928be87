package hysteresis

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// The tests play a service through time with a fake clock: t0 plus
// seconds. Between events, the harness fires the timer the updater would
// (Apply with no changes at s.NextCheck), so what is checked is what DNS
// would show.

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// event is what happens at one second: changes, or a restart (the state
// encoded and decoded, as the store would).
type event struct {
	at      int
	changes []Change
	restart bool
}

func down(vms ...string) []Change { return changes(Down, "", vms) }
func up(vms ...string) []Change   { return changes(Listable, "", vms) }
func gone(vms ...string) []Change { return changes(Removed, "vm_down", vms) }

func changes(is Observed, why string, vms []string) []Change {
	var out []Change
	for _, vm := range vms {
		out = append(out, Change{VM: vm, Is: is, Reason: why})
	}
	return out
}

func names(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("vm%02d", i))
	}
	return out
}

// play creates a service with members (all up, at second -1000), applies
// the events one change at a time as the updater does, and fires the
// timer until second until. It returns every decision in order.
func play(t *testing.T, p Policy, members []string, events []event, until int) ([]Decision, *Service) {
	t.Helper()
	s := NewService("owner", "web")
	var log []Decision
	apply := func(cs []Change, now time.Time) {
		for _, c := range cs {
			ds, _ := p.Apply(s, []Change{c}, now)
			log = append(log, ds...)
		}
		if cs == nil {
			ds, _ := p.Apply(s, nil, now)
			log = append(log, ds...)
		}
	}
	apply(up(members...), at(-1000))
	timer := func(before time.Time, inclusive bool) {
		for !s.NextCheck.IsZero() && (s.NextCheck.Before(before) || inclusive && s.NextCheck.Equal(before)) {
			next := s.NextCheck
			apply(nil, next)
			if !s.NextCheck.After(next) && !s.NextCheck.IsZero() {
				t.Fatalf("timer at %v set the next check to %v: no progress", next, s.NextCheck)
			}
		}
	}
	for _, e := range events {
		timer(at(e.at), true)
		if e.restart {
			var err error
			if s, err = Decode(s.Encode()); err != nil {
				t.Fatal(err)
			}
			continue
		}
		apply(e.changes, at(e.at))
	}
	timer(at(until), true)
	return log, s
}

// releases sums the released decisions by second.
func releases(log []Decision) map[int]int {
	out := map[int]int{}
	for _, d := range log {
		if d.Action == ActionReleased {
			out[int(d.Time.Sub(t0)/time.Second)]++
		}
	}
	return out
}

func TestAllDownAtOnce(t *testing.T) {
	for _, tc := range []struct {
		members int
		want    map[int]int // second → members leaving then
	}{
		{1, map[int]int{600: 1}},
		{2, map[int]int{0: 1, 600: 1}},
		{3, map[int]int{0: 1, 60: 1, 600: 1}},
		{4, map[int]int{0: 1, 60: 1, 120: 1, 600: 1}},
		{10, map[int]int{0: 3, 60: 2, 120: 1, 180: 1, 240: 1, 300: 1, 600: 1}},
		{30, map[int]int{0: 10, 60: 6, 120: 4, 180: 3, 240: 2, 300: 1, 360: 1, 420: 1, 480: 1, 600: 1}},
	} {
		t.Run(fmt.Sprint(tc.members), func(t *testing.T) {
			vms := names(tc.members)
			log, s := play(t, Policy{}, vms, []event{{at: 0, changes: down(vms...)}}, 3600)
			if got := releases(log); !maps.Equal(got, tc.want) {
				t.Errorf("releases by second = %v, want %v", got, tc.want)
			}
			if listed, _ := s.size(); listed != 0 || !s.NextCheck.IsZero() {
				t.Errorf("at the end: %d listed, next check %v; want 0 and none", listed, s.NextCheck)
			}
		})
	}
}

// The forecast made when everybody goes down is what then happens.
func TestForecastMatchesOutcome(t *testing.T) {
	for _, n := range []int{1, 3, 4, 10, 30, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			vms := names(n)
			_, s := play(t, Policy{}, vms, []event{{at: 0, changes: down(vms...)}}, 0)
			forecast := map[string]time.Time{}
			for vm, m := range s.Down {
				switch m.Status {
				case Pending:
					forecast[vm] = m.MayLeaveAt
				case Left:
					forecast[vm] = m.LeftAt
				}
			}
			log, _ := play(t, Policy{}, vms, []event{{at: 0, changes: down(vms...)}}, 3600)
			for _, d := range log {
				if d.Action == ActionReleased && !d.Time.Equal(forecast[d.VM]) {
					t.Errorf("%s left at %v, forecast %v", d.VM, d.Time.Sub(t0), forecast[d.VM].Sub(t0))
				}
			}
			if want := forecast[vms[0]]; !s.NextCheck.IsZero() && s.NextCheck.Before(want) {
				t.Errorf("next check %v before any forecast departure", s.NextCheck.Sub(t0))
			}
		})
	}
}

func TestLastMemberDelay(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members int
		events  []event
		want    map[int]int
	}{
		{"alone", 1, []event{{at: 100, changes: down("vm00")}}, map[int]int{700: 1}},
		{"the other left earlier", 2,
			[]event{{at: 0, changes: down("vm00")}, {at: 100, changes: down("vm01")}},
			map[int]int{0: 1, 700: 1}},
		{"back up resets its clock", 1,
			[]event{{at: 0, changes: down("vm00")}, {at: 300, changes: up("vm00")}, {at: 400, changes: down("vm00")}},
			map[int]int{1000: 1}},
		{"a member joining makes it not the last", 1,
			[]event{{at: 0, changes: down("vm00")}, {at: 100, changes: up("new")}},
			map[int]int{100: 1}},
		{"the others came back: the last waits no more", 3,
			[]event{{at: 0, changes: down("vm00", "vm01", "vm02")}, {at: 200, changes: up("vm00", "vm01")}},
			map[int]int{0: 1, 60: 1, 200: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, _ := play(t, Policy{}, names(tc.members), tc.events, 3600)
			if got := releases(log); !maps.Equal(got, tc.want) {
				t.Errorf("releases by second = %v, want %v\n%s", got, tc.want, history(log))
			}
		})
	}
}

func TestConfigurablePolicy(t *testing.T) {
	p := Policy{Window: 10 * time.Second, LastMemberDelay: 30 * time.Second}
	vms := names(6)
	log, _ := play(t, p, vms, []event{{at: 0, changes: down(vms...)}}, 3600)
	// n=6: 2 at once; then n=4, 3, 2: one every 10 s. The last one's
	// 30 s are up at 30 s, but the window's budget is not: it leaves at
	// 40 s.
	want := map[int]int{0: 2, 10: 1, 20: 1, 30: 1, 40: 1}
	if got := releases(log); !maps.Equal(got, want) {
		t.Errorf("releases by second = %v, want %v\n%s", got, want, history(log))
	}
}

// history renders decisions for failure messages and golden checks.
func history(log []Decision) string {
	var b strings.Builder
	for _, d := range log {
		fmt.Fprintf(&b, "%4d %s %s\n", int(d.Time.Sub(t0)/time.Second), d.VM, d.Action)
	}
	return b.String()
}

func TestFlappingMembers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members int
		events  []event
		want    string // every decision: second, VM, action
	}{
		{
			// A member that flaps spends the window's budget each time it
			// leaves, and counts once in n.
			name: "one member flapping", members: 6,
			events: []event{
				{at: 0, changes: down("vm00")}, {at: 10, changes: up("vm00")},
				{at: 20, changes: down("vm00")}, {at: 30, changes: up("vm00")},
				{at: 40, changes: down("vm00")}, {at: 50, changes: up("vm00")},
				{at: 55, changes: down("vm00")},
			},
			want: `   0 vm00 released
  10 vm00 rejoined
  20 vm00 released
  30 vm00 rejoined
  40 vm00 pending
  50 vm00 kept
  55 vm00 pending
  60 vm00 released
`,
		},
		{
			// Members that come back before their turn are kept; the
			// queue moves on.
			name: "back before their turn", members: 4,
			events: []event{
				{at: 0, changes: down("vm00", "vm01", "vm02")},
				{at: 30, changes: up("vm01")},
				{at: 90, changes: up("vm00")},
			},
			want: `   0 vm00 released
   0 vm01 pending
   0 vm02 pending
  30 vm01 kept
  60 vm02 released
  90 vm00 rejoined
`,
		},
		{
			// A whole service flapping together: each time only a third
			// leaves, the rest are kept.
			name: "all flapping", members: 6,
			events: []event{
				{at: 0, changes: down(names(6)...)}, {at: 5, changes: up(names(6)...)},
				{at: 10, changes: down(names(6)...)}, {at: 15, changes: up(names(6)...)},
			},
			want: `   0 vm00 released
   0 vm01 released
   0 vm02 pending
   0 vm03 pending
   0 vm04 pending
   0 vm05 pending
   5 vm00 rejoined
   5 vm01 rejoined
   5 vm02 kept
   5 vm03 kept
   5 vm04 kept
   5 vm05 kept
  10 vm00 pending
  10 vm01 pending
  10 vm02 pending
  10 vm03 pending
  10 vm04 pending
  10 vm05 pending
  15 vm00 kept
  15 vm01 kept
  15 vm02 kept
  15 vm03 kept
  15 vm04 kept
  15 vm05 kept
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, _ := play(t, Policy{}, names(tc.members), tc.events, 3600)
			if got := history(log); got != tc.want {
				t.Errorf("decisions:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestHardRemovalDuringPending(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members int
		events  []event
		want    string
	}{
		{
			// vm01 is stopped while it waits: it goes at once, and vm02,
			// now the last listed member, waits for its 600 s.
			name: "stopped while waiting", members: 3,
			events: []event{{at: 0, changes: down(names(3)...)}, {at: 30, changes: gone("vm01")}},
			want: `   0 vm00 released
   0 vm01 pending
   0 vm02 pending
  30 vm01 hard-removed
 600 vm02 released
`,
		},
		{
			name: "the last member destroyed while it waits", members: 1,
			events: []event{{at: 0, changes: down("vm00")}, {at: 100, changes: gone("vm00")}},
			want: `   0 vm00 pending
 100 vm00 hard-removed
`,
		},
		{
			// Hard removals shrink n: after vm00-vm03 are stopped, n=6,
			// so the budget is 2 per window, not 3.
			name: "hard removals shrink n", members: 10,
			events: []event{
				{at: 0, changes: gone("vm00", "vm01", "vm02", "vm03")},
				{at: 10, changes: down("vm04", "vm05", "vm06")},
			},
			want: `   0 vm00 hard-removed
   0 vm01 hard-removed
   0 vm02 hard-removed
   0 vm03 hard-removed
  10 vm04 released
  10 vm05 released
  10 vm06 pending
  70 vm06 released
`,
		},
		{
			// A member that left by self-removal and is then destroyed no
			// longer counts in n, but its departure spent the budget.
			name: "departed then destroyed", members: 4,
			events: []event{
				{at: 0, changes: down("vm00")},
				{at: 10, changes: gone("vm00")},
				{at: 20, changes: down("vm01")},
			},
			want: `   0 vm00 released
  20 vm01 pending
  60 vm01 released
`,
		},
		{
			name: "a hard removal of an up member is recorded", members: 2,
			events: []event{{at: 0, changes: gone("vm00")}},
			want: `   0 vm00 hard-removed
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, _ := play(t, Policy{}, names(tc.members), tc.events, 3600)
			if got := history(log); got != tc.want {
				t.Errorf("decisions:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// A restart (state stored and read back) at any point gives the same
// decisions as no restart.
func TestRestartMidWindow(t *testing.T) {
	for _, members := range []int{3, 4, 10, 30} {
		vms := names(members)
		events := []event{{at: 0, changes: down(vms...)}, {at: 90, changes: up(vms[len(vms)-1])}}
		want, _ := play(t, Policy{}, vms, events, 3600)
		for _, restart := range []int{0, 1, 30, 59, 60, 61, 90, 119, 300, 599} {
			t.Run(fmt.Sprintf("%d members restart at %d", members, restart), func(t *testing.T) {
				withRestart := slices.Clone(events)
				i := 0
				for i < len(withRestart) && withRestart[i].at <= restart {
					i++
				}
				withRestart = slices.Insert(withRestart, i, event{at: restart, restart: true})
				got, _ := play(t, Policy{}, vms, withRestart, 3600)
				if history(got) != history(want) {
					t.Errorf("with a restart:\n%s\nwithout:\n%s", history(got), history(want))
				}
			})
		}
	}
}

func TestMembersJoiningAndDownOnArrival(t *testing.T) {
	// A VM first seen down was never listed: it is not held. A member
	// joining raises n at once.
	log, s := play(t, Policy{}, names(5), []event{
		{at: 0, changes: down("vm00", "vm01")}, // n=5: budget 1
		{at: 10, changes: down("newcomer")},
		{at: 20, changes: up("j1", "j2")}, // n=6 with the first: budget 2
	}, 3600)
	want := `   0 vm00 released
   0 vm01 pending
  20 vm01 released
`
	if got := history(log); got != want {
		t.Errorf("decisions:\n%s\nwant:\n%s", got, want)
	}
	if m, ok := s.Member("newcomer"); !ok || m.Status != Left {
		t.Errorf("newcomer = %+v, want a member that is down and not listed", m)
	}
}

// Ensure a member cns never saw up is marked so, with when cns first saw
// it down, through a restart; and that one seen going down is not.
func TestFirstSeenDown(t *testing.T) {
	p := Policy{}
	s := NewService("owner", "web")
	p.Apply(s, up("a", "b"), at(0))
	p.Apply(s, down("newcomer"), at(10))
	if m, _ := s.Member("newcomer"); !m.FirstSeenDown.Equal(at(10)) {
		t.Errorf("newcomer, down on arrival = %+v, want first seen down at 10 s", m)
	}
	_, s = play(t, Policy{}, names(5), []event{
		{at: 10, changes: down("newcomer")},
		{at: 20, changes: down("vm00")},
		{at: 30, restart: true},
		{at: 40, changes: down("newcomer")}, // seen down again: still first seen at 10
	}, 100)
	m, _ := s.Member("newcomer")
	if !m.FirstSeenDown.Equal(at(10)) || !m.DownSince.Equal(at(10)) || !m.LeftAt.IsZero() {
		t.Errorf("newcomer = %+v, want first seen down (and down since) at 10 s, never listed", m)
	}
	if m, _ := s.Member("vm00"); !m.FirstSeenDown.IsZero() || !m.DownSince.Equal(at(20)) {
		t.Errorf("vm00 = %+v, want down since 20 s, seen going down", m)
	}
	// Up at last, then down: now cns saw it go down.
	p.Apply(s, up("newcomer"), at(200))
	p.Apply(s, down("newcomer"), at(210))
	if m, _ := s.Member("newcomer"); !m.FirstSeenDown.IsZero() || !m.DownSince.Equal(at(210)) {
		t.Errorf("newcomer after up and down = %+v, want down since 210 s, seen going down", m)
	}
}

// Ensure a state stored before first_seen_down existed gets it for the
// members that were down when they joined (left, without a departure),
// and only for those.
func TestDecodeOlderStateMarksFirstSeenDown(t *testing.T) {
	old := `{"owner_uuid":"o","service":"web","up":["a"],"down":{` +
		`"joined-down":{"status":"left","down_since":"2025-03-01T12:00:10Z"},` +
		`"released":{"status":"left","down_since":"2025-03-01T12:00:20Z","left_at":"2025-03-01T12:00:20Z"},` +
		`"pending":{"status":"pending","down_since":"2025-03-01T12:00:30Z"}}}`
	s, err := Decode([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := s.Member("joined-down"); !m.FirstSeenDown.Equal(at(10)) {
		t.Errorf("joined-down = %+v, want first seen down at 10 s", m)
	}
	for _, vm := range []string{"released", "pending"} {
		if m, _ := s.Member(vm); !m.FirstSeenDown.IsZero() {
			t.Errorf("%s = %+v, want no first-seen-down time: cns saw it go down", vm, m)
		}
	}
}

func TestNoChangeIsNoWrite(t *testing.T) {
	p := Policy{}
	s := NewService("o", "web")
	if _, changed := p.Apply(s, up("a", "b"), t0); !changed {
		t.Fatal("joins did not change the state")
	}
	if ds, changed := p.Apply(s, up("a"), t0.Add(time.Second)); changed || len(ds) > 0 {
		t.Errorf("an unchanged member changed the state: %v %v", ds, changed)
	}
	if ds, changed := p.Apply(s, gone("nobody"), t0.Add(time.Second)); changed || len(ds) > 0 {
		t.Errorf("removing a non-member changed the state: %v %v", ds, changed)
	}
	p.Apply(s, down("a", "b"), t0) // a leaves, b waits
	next := s.NextCheck
	if ds, changed := p.Apply(s, nil, next.Add(-time.Second)); changed || len(ds) > 0 {
		t.Errorf("the timer before the next check changed the state: %v %v", ds, changed)
	}
}

func TestHistoryIsBounded(t *testing.T) {
	p := Policy{}
	s := NewService("o", "web")
	p.Apply(s, up("a", "b", "c", "d"), t0)
	for i := range 100 {
		now := t0.Add(time.Duration(i) * time.Second)
		p.Apply(s, down("a"), now)
		p.Apply(s, up("a"), now)
	}
	if len(s.History) != HistoryLength {
		t.Fatalf("history holds %d decisions, want %d", len(s.History), HistoryLength)
	}
	if last := s.History[len(s.History)-1]; !last.Time.Equal(t0.Add(99 * time.Second)) {
		t.Errorf("the newest decision is %+v, want one at 99 s", last)
	}
}

func TestView(t *testing.T) {
	p := Policy{}
	_, s := play(t, p, names(10), []event{{at: 0, changes: down("vm00", "vm01", "vm02", "vm03")}}, 10)
	v := p.View(s, at(10))
	if v.Listed != 7 || v.N != 10 || v.Budget != 3 || v.BudgetLeft != 0 || !v.WindowFreesAt.Equal(at(60)) || !v.NextCheck.Equal(at(60)) {
		t.Errorf("view = listed %d n %d budget %d left %d frees %v next %v; want 7 10 3 0 60s 60s",
			v.Listed, v.N, v.Budget, v.BudgetLeft, v.WindowFreesAt.Sub(t0), v.NextCheck.Sub(t0))
	}
	if len(v.Members) != 10 || v.Members[3].VM != "vm03" || v.Members[3].Status != string(Pending) || !v.Members[3].MayLeaveAt.Equal(at(60)) {
		t.Errorf("members = %+v", v.Members)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"owner_uuid":"owner"`, `"service":"web"`, `"vm":"vm03","status":"pending","down_since":"2025-03-01T12:00:00Z","may_leave_at":"2025-03-01T12:01:00Z"`, `"budget_left":0`, `"action":"released"`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("view JSON lacks %s:\n%s", field, b)
		}
	}
	// Later, the window has moved on: the view says so without a change.
	if v := p.View(s, at(200)); len(v.Departures) != 0 || v.N != 7 || v.BudgetLeft != 2 {
		t.Errorf("at 200 s: departures %+v, n %d, budget left %d; want none, 7, 2", v.Departures, v.N, v.BudgetLeft)
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	if _, err := Decode([]byte("{")); err == nil {
		t.Error("a truncated state decoded")
	}
	s, err := Decode([]byte(`{"owner_uuid":"o","service":"web","down":{"a":null,"b":{"status":"up"}}}`))
	if err != nil || !s.Empty() || s.Up == nil || s.Down == nil {
		t.Errorf("Decode = %+v, %v; want no members", s, err)
	}
	s, err = Decode(NewService("o", "web").Encode())
	if err != nil || !s.Empty() || s.Up == nil || s.Down == nil {
		t.Errorf("Decode = %+v, %v; want no members", s, err)
	}
}

// Ensure stored times from a run whose clock was ahead (the system clock
// stepped back an hour while cns was stopped) neither hold the last
// member for the hour on top of its delay, nor the window's budget.
func TestClockSteppedBackWhileStopped(t *testing.T) {
	p := Policy{}.normal()
	s := NewService("owner", "web")
	p.Apply(s, up("a", "b"), at(-1000))
	p.Apply(s, down("a"), at(0)) // the first leaves at once (budget 1)
	p.Apply(s, down("b"), at(1)) // the last member waits LastMemberDelay
	if m := s.Down["b"]; m == nil || m.Status != Pending {
		t.Fatalf("b: %+v", s.Down["b"])
	}
	// Stored, and read back by a run whose clock is an hour behind.
	s, err := Decode(s.Encode())
	if err != nil {
		t.Fatal(err)
	}
	restart := at(2).Add(-time.Hour)
	p.Apply(s, nil, restart)
	if s.NextCheck.IsZero() || s.NextCheck.After(restart.Add(p.LastMemberDelay)) {
		t.Fatalf("next check %v: later than the last-member delay (%v) from the restart at %v", s.NextCheck, p.LastMemberDelay, restart)
	}
	// It is released at that check, not an hour later.
	for now := restart; s.Down["b"].Status == Pending; now = s.NextCheck {
		if now.After(restart.Add(p.LastMemberDelay)) {
			t.Fatalf("b still pending at %v", now)
		}
		p.Apply(s, nil, now)
	}
	// Nor early: not before the delay counted from the restart.
	if left := s.Down["b"].LeftAt; left.Before(restart.Add(p.LastMemberDelay)) {
		t.Fatalf("b left at %v, before its delay", left)
	}
}

// Ensure times on a clock that runs on as usual are left alone.
func TestDistrustFutureLeavesThePastAlone(t *testing.T) {
	p := Policy{}.normal()
	s := NewService("owner", "web")
	p.Apply(s, up("a", "b"), at(-1000))
	p.Apply(s, down("a"), at(0))
	p.Apply(s, down("b"), at(1))
	before := string(s.Encode())
	if s.distrustFuture(p, at(5)) || string(s.Encode()) != before {
		t.Fatal("distrustFuture changed a service whose times are all in the past")
	}
}
