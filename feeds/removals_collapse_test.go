package feeds_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/guard"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// A slow collapse: an upstream that drops VMs over several batches, each
// under the threshold, together over it inside the window. The batch
// that crosses it is held, and so are the removals the window applied
// before it: their names come back. The collapse is held whole, as a
// single drop is. (The updater's clock does not move in these tests:
// every batch is inside the window.)

// CNAPI reports the 20 compute nodes down one poll at a time (a message
// bus outage: each CN's heartbeat goes stale on its own), each CN 5 % of
// the 1,000 VMs. The first ones leave their services as they come, under
// a quarter together; the one that takes the total over trips the guard,
// and from then on every service name is served as before, as when CNAPI
// reports them all down at once; the hold is that hold, VM for VM. Every
// CN up again releases it.
func TestGuardSlowCNCollapseHeldWhole(t *testing.T) {
	w := newGZWorld(t)
	before, svcs := w.names(), w.services()
	tripped := 0
	for i, s := range w.sim.Inventory().Servers {
		if err := w.sim.ModifyServer(s.UUID, cnDown); err != nil {
			t.Fatal(err)
		}
		w.cnapiAnswered()
		_, held := w.hold(guard.CNDown)
		switch {
		case !held && w.services() >= svcs:
			t.Fatalf("CN %d down, not held: its VMs are still in their services", i+1)
		case !held:
			svcs = w.services() // applied at once
		case tripped == 0:
			tripped = i + 1
			fallthrough
		default:
			if got := w.names(); !slices.Equal(got, before) {
				t.Fatalf("CN %d down, held (since CN %d): %d records, was %d", i+1, tripped, len(got), len(before))
			}
		}
	}
	if tripped < 3 {
		t.Fatalf("the guard tripped at CN %d of 20: no slow collapse to hold", tripped)
	}
	slow, _ := w.hold(guard.CNDown)

	// The same data center with CNAPI reporting every CN down at once.
	one := newGZWorld(t)
	one.allCNs(cnDown)
	one.waitFor("the removals to be held", func() bool { _, ok := one.hold(guard.CNDown); return ok && one.idle() })
	if whole, _ := one.hold(guard.CNDown); slow.VMs != whole.VMs || slow.Peak != whole.Peak || slow.Of != whole.Of {
		t.Errorf("the slow collapse's hold is %+v, a single drop's %+v", slow, whole)
	}
	if n := w.u.HeldRemovals()["cn_down"]; n != slow.VMs {
		t.Errorf("the metric says %d VMs held, the hold %d", n, slow.VMs)
	}
	if got := w.events(); !slices.Equal(got, []string{"cn_down held"}) {
		t.Errorf("events %q, want one hold", got)
	}
	if n := w.logLines("removals held"); n != 1 {
		t.Errorf("%d error lines for the hold, want 1", n)
	}
	line := w.logLine("removals held")
	if n, _ := line["recalled"].(float64); n == 0 || line["recalled"] != line["applied_in_window"] {
		t.Errorf("the hold's log line: %v", line)
	}
	t.Logf("held at CN %d: %v VMs, %v of them recalled, of %v stored; %d held at the end", tripped, line["vms"], line["recalled"], line["of"], slow.VMs)

	w.allCNs(cnUp)
	w.waitFor("the hold to clear", func() bool { _, ok := w.hold(guard.CNDown); return !ok && w.idle() })
	if got := w.names(); !slices.Equal(got, before) {
		t.Errorf("after the recovery %d records, was %d", len(got), len(before))
	}
	if got := w.events(); !slices.Equal(got, []string{"cn_down held", "cn_down released"}) {
		t.Errorf("events %q", got)
	}
}

// A listing short by 600 of the 1,000 VMs, committed in chunks (of 127
// VMs, an eighth of the 1,020 stored, as a large data center's are: up to
// 60,000 VMs): the first chunk's deletions apply, and the second's unless
// the first was stored by then (254 VMs, 24.9 % of 1,020, or 28.4 % of
// the 893 left); the chunk that takes the total over a quarter trips the
// guard. All 600 are held, those deleted before among them, and every
// name is served again. A whole listing releases the hold.
func TestGuardChunkedShortListingHeldWhole(t *testing.T) {
	w := newGZWorld(t)
	w.u.SetSizes(100, 0)
	before := w.names()
	vms := w.sim.Inventory().VMs[:600]
	for _, vm := range vms {
		if err := w.sim.PurgeVM(vm.UUID); err != nil {
			t.Fatal(err)
		}
	}
	w.relist()
	if h, ok := w.hold(guard.Unlisted); !ok || h.VMs != 600 || h.Peak != 600 {
		t.Fatalf("after the short listing the hold is %+v (%v), want 600 VMs held", h, ok)
	}
	if got := w.names(); !slices.Equal(got, before) {
		t.Fatalf("held, %d records, was %d", len(got), len(before))
	}
	// The log says how many the window applied before and how many of
	// those the hold recalled: all of them.
	line := w.logLine("removals held")
	if n, _ := line["recalled"].(float64); n < 100 || line["applied_in_window"] != line["recalled"] {
		t.Errorf("the hold's log line: %v", line)
	}
	t.Logf("the hold's log line: %v VMs held, %v recalled, of %v stored", line["vms"], line["recalled"], line["of"])
	w.putBack(vms, before)
	if got := w.events(); !slices.Equal(got, []string{"unlisted held", "unlisted released"}) {
		t.Errorf("events %q", got)
	}
}

// UFDS answers the 40 accounts without triton_cns_enabled one at a time
// (25 VMs, 2.5 % each): the first ones lose their names as they come, one
// account after another; the one that takes the total over a quarter
// trips the guard, and every name comes back. The operator accepts: they
// all go.
func TestGuardSlowOwnersOffHeldWhole(t *testing.T) {
	w := newGZWorld(t)
	all := w.instances()
	named, tripped := all, 0
	for i, usr := range w.sim.Inventory().Users {
		if err := w.sim.SetUserFlag(usr.UUID, "triton_cns_enabled", "false"); err != nil {
			t.Fatal(err)
		}
		w.waitFor("UFDS's answer", func() bool { o, ok := w.u.Owner(usr.UUID); return ok && !dc.Flag(o.TritonCNSEnabled) && w.idle() })
		if _, held := w.hold(guard.OwnerOff); !held {
			if n := w.instances(); n >= named {
				t.Fatalf("account %d off, not held: %d instances keep names, were %d", i+1, n, named)
			}
			named = w.instances() // applied at once
			continue
		}
		if tripped == 0 {
			tripped = i + 1
		}
		if n := w.instances(); n != all {
			t.Fatalf("account %d off, held (since account %d): %d instances with names, was %d", i+1, tripped, n, all)
		}
	}
	if tripped < 3 {
		t.Fatalf("the guard tripped at account %d: no slow collapse to hold", tripped)
	}
	line := w.logLine("removals held")
	if n, _ := line["recalled"].(float64); n == 0 || line["recalled"] != line["applied_in_window"] {
		t.Errorf("the hold's log line: %v", line)
	}
	h, _ := w.hold(guard.OwnerOff)
	t.Logf("held at account %d of %d: %v VMs, %v of them recalled, of %v stored; %d held at the end",
		tripped, len(w.sim.Inventory().Users), line["vms"], line["recalled"], line["of"], h.VMs)
	if _, err := w.u.AcceptRemovals(""); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the names to leave", func() bool { return w.idle() && w.instances() == 0 })
	if got := w.events(); !slices.Equal(got, []string{"owner_off held", "owner_off accepted"}) {
		t.Errorf("events %q", got)
	}
}

// A listing short by 600 of 1,000 VMs is committed in chunks; between
// the first chunk (which deletes VM x) and the next, a new VM y comes on
// x's address (its creation, a live change, is committed out of turn).
// The next chunk trips the guard and recalls the first chunk's VMs, x
// among them: x, computed as held, would take back the PTR y has, so x
// is let go again; the address's PTR stays y's, the rest of the hold
// stands. (One batch at a time, by Flush.)
func TestGuardRecalledVMYieldsToNewVM(t *testing.T) {
	store, u, missing := shortInChunks(t)
	x, second := missing[0], missing[1]
	ptr := ptrOf(t, store, x.UUID)
	if err := u.Flush(); err != nil { // the first chunk
		t.Fatal(err)
	}
	if _, ok, _ := store.VM(x.UUID); ok || len(u.RemovalGuard().Holds) != 0 {
		t.Fatalf("after the first chunk x is stored (%v) or the guard holds %+v", ok, u.RemovalGuard().Holds)
	}
	y := x
	y.UUID = "ffff0000-0000-4000-8000-000000000044"
	u.SetVM(&y, "created")
	if err := u.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := vmsAt(t, store, ptr); !slices.Equal(got, []string{y.UUID}) {
		t.Fatalf("%s names %q, want the new VM", ptr.Owner, got)
	}
	flushAll(t, u)

	h := u.RemovalGuard()
	if len(h.Holds) != 1 || h.Holds[0].VMs != 599 {
		t.Fatalf("the holds are %+v, want one of the listing's 600 VMs but x", h.Holds)
	}
	var events []string
	for _, e := range h.History {
		events = append(events, e.Cause+" "+e.Action)
	}
	if !slices.Equal(events, []string{"unlisted held", "unlisted yielded"}) {
		t.Errorf("events %q", events)
	}
	if got := vmsAt(t, store, ptr); !slices.Equal(got, []string{y.UUID}) {
		t.Errorf("%s names %q, want the new VM only", ptr.Owner, got)
	}
	if _, ok, _ := store.VM(x.UUID); ok {
		t.Errorf("x, whose address the new VM took, is stored again")
	}
	if _, ok, _ := store.VM(second.UUID); !ok {
		t.Errorf("recalled, the first chunk's other VMs are not stored again")
	}
}

// shortInChunks loads 1,000 VMs into an updater of its own, then puts a
// listing that misses 600 of them, to be committed in chunks (of 127 VMs,
// an eighth of the store) by Flush. It returns the store, the updater and
// the VMs missing, by UUID: the order their deletions are committed in
// (deleted VMs first).
func shortInChunks(t *testing.T) (*db.DB, *feeds.Updater, []dc.VM) {
	t.Helper()
	store, u := windowUpdater(t, time.Millisecond)
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 1000, Seed: 43})
	u.SetInventory(inv, "load")
	flushAll(t, u)
	u.SetSizes(100, 0)
	missing := slices.Clone(inv.VMs[:600])
	slices.SortFunc(missing, func(a, b dc.VM) int { return strings.Compare(a.UUID, b.UUID) })
	short := *inv
	short.VMs = slices.Clone(inv.VMs[600:])
	short.Listing = u.BeginListing()
	u.SetInventory(&short, "vmapi full listing")
	return store, u, missing
}

// ptrOf returns the name of vm's first PTR record in the store.
func ptrOf(t *testing.T, store *db.DB, vm string) db.Name {
	t.Helper()
	v, ok, err := store.VM(vm)
	if err != nil || !ok {
		t.Fatalf("VM %s: %v, %v", vm, ok, err)
	}
	for _, r := range v.Records {
		for _, rr := range r.RRs {
			if rr.Header().Rrtype == dns.TypePTR {
				return db.Name{Zone: r.Zone, Owner: r.Owner}
			}
		}
	}
	t.Fatalf("VM %s has no PTR", vm)
	return db.Name{}
}

// vmsAt returns the VMs with records at name.
func vmsAt(t *testing.T, store *db.DB, name db.Name) []string {
	t.Helper()
	var out []string
	if err := store.VMsAt([]db.Name{name}, func(_ int, vm string) { out = append(out, vm) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// logLine returns the first log line whose message begins with msg.
func (w *gzWorld) logLine(msg string) map[string]any {
	w.t.Helper()
	for _, l := range strings.Split(w.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && strings.HasPrefix(fmt.Sprint(m["msg"]), msg) {
			return m
		}
	}
	w.t.Fatalf("no log line %q", msg)
	return nil
}

// A VM recalled into a hold that VMAPI then confirms destroyed, before
// its names came back, leaves the hold: nothing of it is stored to keep,
// and a hold that waited for it to go would never end. A listing short by
// 600 of 1,000 VMs, in chunks; one batch at a time, by Flush.
func TestGuardRecalledVMDestroyedLeavesTheHold(t *testing.T) {
	store, u, missing := shortInChunks(t)
	x := missing[0]
	for len(u.RemovalGuard().Holds) == 0 {
		if u.Pending() == 0 {
			t.Fatal("the short listing is applied, and not held")
		}
		if err := u.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := store.VM(x.UUID); ok {
		t.Fatal("x, in the first chunk, is stored: nothing to recall")
	}
	u.RemoveVM(x.UUID, "destroyed")
	flushAll(t, u)
	if h := u.RemovalGuard().Holds; len(h) != 1 || h[0].VMs != 599 {
		t.Fatalf("after a recalled VM's destroy the holds are %+v, want the listing's 600 VMs but x", h)
	}
	if n, err := u.AcceptRemovals(""); err != nil || n != 599 {
		t.Fatalf("accept: %d VMs, %v", n, err)
	}
	flushAll(t, u)
	if h := u.RemovalGuard().Holds; len(h) != 0 {
		t.Errorf("accepted and applied, the holds are %+v, want none", h)
	}
}
