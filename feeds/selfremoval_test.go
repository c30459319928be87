package feeds_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/hysteresis"
	"github.com/tritondatacenter/cns/feeds/records"
)

// The updater with the self-removal hysteresis, on a real store, with a
// fake clock: the service "web" of one owner, its members going down by
// their triton.cns.status, and what the store then publishes at
// web.svc.<owner>.<zone>.

const (
	hzZone   = "hyst.example.com"
	hzOwner  = "0b5a1d4e-6f2c-4c1e-9a7b-3d2e1f0a9b8c"
	hzServer = "44454c4c-3300-1034-8037-b7c04f4e3232"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// hzWorld is one data center and the cns (store + updater) watching it.
type hzWorld struct {
	t      *testing.T
	path   string
	clock  *fakeClock
	now    func() time.Time
	policy hysteresis.Policy
	window time.Duration // the updater's batch window
	inv    dc.Inventory
	store  *db.DB
	u      *feeds.Updater
	start  time.Time
}

func newHZWorld(t *testing.T, members int) *hzWorld {
	t.Helper()
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := &fakeClock{t: start}
	w := &hzWorld{t: t, path: filepath.Join(t.TempDir(), "cns.db"), clock: clock, now: clock.Now, start: start}
	w.populate(members)
	w.open()
	return w
}

func (w *hzWorld) populate(members int) {
	w.inv.Users = []dc.User{{UUID: hzOwner, Login: "alice", TritonCNSEnabled: "true", ApprovedForProvisioning: "true"}}
	w.inv.Servers = []dc.Server{{UUID: hzServer, Hostname: "cn1", Setup: true, Status: "running"}}
	for i := range members {
		w.inv.VMs = append(w.inv.VMs, hzVM(i))
	}
}

func hzUUID(i int) string { return fmt.Sprintf("5e1f0000-0000-4000-8000-%012d", i) }

func hzVM(i int) dc.VM {
	return dc.VM{UUID: hzUUID(i), OwnerUUID: hzOwner, ServerUUID: hzServer, State: "running", Brand: "joyent",
		NICs: []dc.NIC{{Interface: "net0", IP: fmt.Sprintf("10.0.0.%d", 10+i), IPs: []string{fmt.Sprintf("10.0.0.%d/24", 10+i)},
			NetworkUUID: "d0d0d0d0-0000-4000-8000-000000000001", Primary: true}},
		Tags: map[string]any{"triton.cns.services": "web"}, CustomerMetadata: map[string]any{}}
}

// open opens the store and a new updater on it, as cns serve does, and
// hands it the inventory.
func (w *hzWorld) open() {
	w.t.Helper()
	store, err := db.Open(w.path, db.Options{NoSync: true})
	if err != nil {
		w.t.Fatal(err)
	}
	rc, zc := hzConfig()
	u, err := feeds.NewUpdater(store, feeds.Options{Records: rc, Zones: zc, Now: w.now, Hysteresis: w.policy,
		BatchWindow: w.window, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		store.Close()
		w.t.Fatal(err)
	}
	w.store, w.u = store, u
	w.t.Cleanup(func() { store.Close() })
	inv := w.inv
	inv.VMs = slices.Clone(inv.VMs)
	u.SetInventory(&inv, "test inventory")
	w.settle()
}

// hzConfig is the naming and zone configuration: one zone taking every
// network.
func hzConfig() (records.Config, db.ZoneConfig) {
	rc := records.Config{Zones: []records.Zone{{Name: hzZone, Networks: []string{"*"}}}}
	zc := db.ZoneConfig{Forward: map[string]db.Apex{hzZone: {MName: "ns." + hzZone + ".", RName: "hostmaster." + hzZone + ".",
		Refresh: 30, Retry: 60, Expire: 86400, Minimum: 30, SOATTL: 30, NS: []string{"ns." + hzZone + "."}, NSTTL: 3600}}}
	return rc, zc
}

// restart closes the store and starts over on the same file.
func (w *hzWorld) restart() {
	w.t.Helper()
	w.store.Close()
	w.open()
}

// settle commits everything pending.
func (w *hzWorld) settle() {
	w.t.Helper()
	for range 10 {
		if err := w.u.Flush(); err != nil {
			w.t.Fatal(err)
		}
		if w.u.Pending() == 0 {
			return
		}
	}
	w.t.Fatalf("still %d VMs pending", w.u.Pending())
}

// vm changes VM i in the data center and tells the updater, as a
// changefeed event would.
func (w *hzWorld) vm(i int, change func(vm *dc.VM)) {
	w.t.Helper()
	change(&w.inv.VMs[i])
	vm := w.inv.VMs[i]
	w.u.SetVM(&vm, "test change")
}

func (w *hzWorld) status(value string, vms ...int) {
	for _, i := range vms {
		w.vm(i, func(vm *dc.VM) { vm.CustomerMetadata["triton.cns.status"] = value })
	}
	w.settle()
}

// at moves the clock to sec seconds after the start, firing the timer at
// every next check on the way, as the Run loop does.
func (w *hzWorld) at(sec int) {
	w.t.Helper()
	target := w.start.Add(time.Duration(sec) * time.Second)
	for {
		next := target
		for _, v := range w.u.Services() {
			if !v.NextCheck.IsZero() && v.NextCheck.Before(next) {
				next = v.NextCheck
			}
		}
		if next.Before(w.clock.Now()) {
			next = w.clock.Now()
		}
		w.clock.Advance(next.Sub(w.clock.Now()))
		w.u.Tick()
		w.settle()
		if next.Equal(target) {
			return
		}
	}
}

// listed returns the addresses the store publishes for the service.
func (w *hzWorld) listed() []string {
	w.t.Helper()
	name := "web.svc." + hzOwner + "." + hzZone
	zw, _ := db.ZoneWire(hzZone)
	ow, _ := db.ZoneWire(name)
	rrs, _, err := w.store.Lookup(hzZone, zw, ow)
	if err != nil {
		w.t.Fatal(err)
	}
	list, err := rrs.ToRR(dns.Fqdn(name))
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, rr := range list {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	slices.Sort(out)
	return out
}

func all(n int) []int {
	var out []int
	for i := range n {
		out = append(out, i)
	}
	return out
}

// timeline checks how many members are listed at each second.
func (w *hzWorld) timeline(want map[int]int) {
	w.t.Helper()
	for _, sec := range slices.Sorted(maps.Keys(want)) {
		w.at(sec)
		if got := len(w.listed()); got != want[sec] {
			w.t.Errorf("at %d s: %d members listed, want %d", sec, got, want[sec])
		}
	}
}

func TestUpdaterSelfRemovalPace(t *testing.T) {
	for _, tc := range []struct {
		members int
		want    map[int]int // second → listed members
	}{
		{3, map[int]int{0: 2, 59: 2, 60: 1, 599: 1, 600: 0}},
		{4, map[int]int{0: 3, 60: 2, 120: 1, 599: 1, 600: 0}},
		{10, map[int]int{0: 7, 59: 7, 60: 5, 120: 4, 180: 3, 240: 2, 300: 1, 599: 1, 600: 0}},
		{30, map[int]int{0: 20, 60: 14, 120: 10, 180: 7, 240: 5, 300: 4, 360: 3, 420: 2, 480: 1, 599: 1, 600: 0}},
	} {
		t.Run(fmt.Sprint(tc.members), func(t *testing.T) {
			w := newHZWorld(t, tc.members)
			if got := len(w.listed()); got != tc.members {
				t.Fatalf("%d members listed before, want %d", got, tc.members)
			}
			w.status("down", all(tc.members)...)
			w.timeline(tc.want)
		})
	}
}

// A member kept listed says why: reason "held", in what the store keeps
// for `cnsadm vm`; one that left says inst_en_flag only.
func TestUpdaterHeldReason(t *testing.T) {
	w := newHZWorld(t, 3)
	w.status("down", 0, 1, 2)
	reasons := func(i int) []string {
		vm, ok, err := w.store.VM(hzUUID(i))
		if err != nil || !ok {
			t.Fatalf("VM %d: %v %v", i, ok, err)
		}
		m, err := feeds.DecodeVMMeta(vm.Meta)
		if err != nil {
			t.Fatal(err)
		}
		return m.Reasons
	}
	if got := reasons(0); !slices.Equal(got, []string{"inst_en_flag"}) {
		t.Errorf("released member: reasons %v", got)
	}
	for _, i := range []int{1, 2} {
		if got := reasons(i); !slices.Equal(got, []string{"inst_en_flag", "held"}) {
			t.Errorf("member %d: reasons %v, want inst_en_flag, held", i, got)
		}
	}
}

// The status key: absent or "up" is up, "down" and anything else down.
func TestUpdaterStatusValues(t *testing.T) {
	for _, tc := range []struct {
		value string
		down  bool
	}{{"up", false}, {"down", true}, {"DOWN", true}, {"maintenance", true}, {"", true}} {
		t.Run(tc.value, func(t *testing.T) {
			w := newHZWorld(t, 3)
			w.status(tc.value, 0)
			v, err := w.u.Service(hzOwner, "web")
			if err != nil {
				t.Fatal(err)
			}
			left := v.Members[0].Status == string(hysteresis.Left)
			if left != tc.down || len(w.listed()) != 3-btoi(tc.down) {
				t.Errorf("status %q: member 0 %s, %d listed", tc.value, v.Members[0].Status, len(w.listed()))
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Hard removals bypass the hysteresis: the member goes in the next change
// set, even while it waits for its turn, and no longer counts.
func TestUpdaterHardRemovalDuringPending(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(w *hzWorld, i int)
		reason string
	}{
		{"stopped", func(w *hzWorld, i int) { w.vm(i, func(vm *dc.VM) { vm.State = "stopped" }) }, "vm_down"},
		{"destroyed", func(w *hzWorld, i int) { w.u.RemoveVM(hzUUID(i), "destroyed") }, "destroyed"},
		{"disable tag", func(w *hzWorld, i int) { w.vm(i, func(vm *dc.VM) { vm.Tags["triton.cns.disable"] = true }) }, "inst_en_tag"},
		{"service tag removed", func(w *hzWorld, i int) { w.vm(i, func(vm *dc.VM) { vm.Tags["triton.cns.services"] = "api" }) }, "service tag removed"},
		{"CN down", func(w *hzWorld, i int) {
			w.vm(i, func(vm *dc.VM) { vm.ServerUUID = "44454c4c-3300-1034-8037-000000000bad" })
			w.u.SetServers(append(slices.Clone(w.inv.Servers), dc.Server{UUID: "44454c4c-3300-1034-8037-000000000bad", Hostname: "cn2"}), "test")
		}, "cn_down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newHZWorld(t, 4)
			w.status("down", 0, 1, 2) // n=4: member 0 leaves, 1 and 2 wait
			if got := len(w.listed()); got != 3 {
				t.Fatalf("%d listed after the downs, want 3", got)
			}
			tc.remove(w, 1)
			w.settle() // the next change set, no time passing
			if got := len(w.listed()); got != 2 {
				t.Fatalf("%d listed after the hard removal, want 2", got)
			}
			v, err := w.u.Service(hzOwner, "web")
			if err != nil {
				t.Fatal(err)
			}
			last := v.History[len(v.History)-1]
			if last.VM != hzUUID(1) || last.Action != string(hysteresis.ActionHardRemoved) || !strings.HasPrefix(last.Reason, tc.reason) {
				t.Errorf("last decision %+v, want %s hard-removed (%s...)", last, hzUUID(1), tc.reason)
			}
			// n is 3 now (2 listed + member 0, gone within the window):
			// member 2 leaves at 60 s, then member 3 is the last one up.
			w.timeline(map[int]int{59: 2, 60: 1, 3600: 1})
		})
	}
}

// A restart in the middle of a window reloads the state from the store
// (pending members and their clocks) and ends the same way.
func TestUpdaterRestartMidWindow(t *testing.T) {
	want := map[int]int{0: 7, 30: 7, 59: 7, 60: 5, 90: 5, 120: 4, 300: 1, 599: 1, 600: 0}
	for _, restart := range []int{1, 30, 60, 90, 450} {
		t.Run(fmt.Sprintf("restart at %d s", restart), func(t *testing.T) {
			w := newHZWorld(t, 10)
			w.status("down", all(10)...)
			for _, sec := range slices.Sorted(maps.Keys(want)) {
				if sec >= restart && restart >= 0 {
					w.at(restart)
					w.restart()
					restart = -1
				}
				w.at(sec)
				if got := len(w.listed()); got != want[sec] {
					t.Errorf("at %d s: %d members listed, want %d", sec, got, want[sec])
				}
			}
		})
	}
}

// The stored state is the one the records came from: every member the
// store holds as pending is exactly a member whose records say "held".
func TestUpdaterStateStoredWithRecords(t *testing.T) {
	w := newHZWorld(t, 10)
	w.status("down", all(6)...)
	stored, err := w.store.Hysteresis()
	if err != nil {
		t.Fatal(err)
	}
	s, err := hysteresis.Decode(stored[hysteresis.Key(hzOwner, "web")])
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		vm, _, _ := w.store.VM(hzUUID(i))
		m, _ := feeds.DecodeVMMeta(vm.Meta)
		if held := slices.Contains(m.Reasons, "held"); held != s.Held(hzUUID(i)) {
			t.Errorf("member %d: records held %v, stored state held %v", i, held, s.Held(hzUUID(i)))
		}
	}
	if got := len(w.listed()); got != 7 {
		t.Errorf("%d listed, want 7 (n=10: 3 leave at once)", got)
	}
}

// The Run loop wakes up when a held member's turn comes, without any feed
// event and without polling: real clock, short policy.
func TestUpdaterRunWakesForNextRelease(t *testing.T) {
	p := hysteresis.Policy{Window: 300 * time.Millisecond, LastMemberDelay: 900 * time.Millisecond}
	w := &hzWorld{t: t, path: filepath.Join(t.TempDir(), "cns.db"), now: time.Now, policy: p, window: 10 * time.Millisecond}
	w.populate(3)
	w.open()
	u := w.u
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { u.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if got := len(w.listed()); got != 3 {
		t.Fatalf("%d members listed, want 3", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	downAt := time.Now()
	for i := range 3 {
		w.vm(i, func(vm *dc.VM) { vm.CustomerMetadata["triton.cns.status"] = "down" })
	}
	for len(w.listed()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still %d listed 10 s on", len(w.listed()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if took := time.Since(downAt); took < p.LastMemberDelay {
		t.Errorf("the service emptied %v after the downs, before the last member's %v", took, p.LastMemberDelay)
	}
	v, err := u.Service(hzOwner, "web")
	if err != nil {
		t.Fatal(err)
	}
	var released []time.Time
	for _, d := range v.History {
		if d.Action == string(hysteresis.ActionReleased) {
			released = append(released, d.Time)
		}
	}
	if len(released) != 3 {
		t.Fatalf("history %+v: want 3 releases", v.History)
	}
	if gap := released[1].Sub(released[0]); gap < p.Window {
		t.Errorf("the second member left %v after the first, within the %v window", gap, p.Window)
	}
}

func TestUpdaterServicesView(t *testing.T) {
	w := newHZWorld(t, 6)
	w.status("down", 0, 1, 2)
	views := w.u.Services()
	if len(views) != 1 {
		t.Fatalf("%d services, want 1", len(views))
	}
	v := views[0]
	if v.Owner != hzOwner || v.Service != "web" || v.Listed != 4 || v.N != 6 || v.BudgetLeft != 0 || len(v.Members) != 6 {
		t.Errorf("view %+v", v)
	}
	if _, err := w.u.Service(hzOwner, "nope"); err == nil {
		t.Error("an unknown service was found")
	}
}
