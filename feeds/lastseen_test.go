package feeds_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
)

func recordTexts(t *testing.T, vm db.VM) []string {
	t.Helper()
	var out []string
	for _, r := range vm.Records {
		for _, rr := range r.RRs {
			out = append(out, rr.String())
		}
	}
	return out
}

// A full listing that sees a VM unchanged moves its last-seen time
// without touching its records, its meta or the zone's serial; the store
// learns the time coarsely (every feeds.LastSeenSaveEvery at most), so a
// restart knows it roughly.
func TestLastSeenByAFeed(t *testing.T) {
	w := newHZWorld(t, 2)
	vm0 := hzUUID(0)
	if at, ok := w.u.LastSeen(vm0); !ok || !at.Equal(w.start) {
		t.Fatalf("first listing: last seen %v %v, want %v", at, ok, w.start)
	}
	before, _, _ := w.store.VM(vm0)
	serial := w.serial()
	relist := func() {
		inv := w.inv
		w.u.SetInventory(&inv, "test: full listing")
		w.settle()
	}

	w.clock.Advance(time.Minute)
	relist()
	if at, _ := w.u.LastSeen(vm0); !at.Equal(w.start.Add(time.Minute)) {
		t.Errorf("seen again a minute later: last seen %v", at)
	}
	after, _, _ := w.store.VM(vm0)
	if w.serial() != serial || !slices.Equal(recordTexts(t, after), recordTexts(t, before)) || string(after.Meta) != string(before.Meta) {
		t.Errorf("an unchanged VM seen again was rewritten: serial %d -> %d\n%s\n%s", serial, w.serial(), before.Meta, after.Meta)
	}
	// Its stored meta still says when it was seen a minute ago: nothing
	// to save yet.
	if err := w.u.SaveLastSeen(); err != nil {
		t.Fatal(err)
	}
	if vm, _, _ := w.store.VM(vm0); !vm.LastSeen.IsZero() {
		t.Errorf("saved after a minute: %v", vm.LastSeen)
	}

	// Seen again once the stored time is LastSeenSaveEvery old: saved,
	// still without a new serial.
	w.clock.Advance(feeds.LastSeenSaveEvery)
	relist()
	if err := w.u.SaveLastSeen(); err != nil {
		t.Fatal(err)
	}
	want := w.start.Add(time.Minute + feeds.LastSeenSaveEvery)
	for i := range 2 {
		if vm, _, _ := w.store.VM(hzUUID(i)); !vm.LastSeen.Equal(want) {
			t.Errorf("vm %d: stored last seen %v, want %v", i, vm.LastSeen, want)
		}
	}
	if vm, _, _ := w.store.VM(hzServer); !vm.LastSeen.Equal(want) {
		t.Errorf("the compute node: stored last seen %v, want %v", vm.LastSeen, want)
	}
	if w.serial() != serial {
		t.Errorf("saving last-seen times changed the serial: %d -> %d", serial, w.serial())
	}

	// A changefeed event that changes nothing is a sighting too; the VM
	// removed takes its stored time with it.
	w.clock.Advance(time.Second)
	vm := w.inv.VMs[1]
	w.u.SetVM(&vm, "test: changefeed")
	if at, _ := w.u.LastSeen(hzUUID(1)); !at.Equal(want.Add(time.Second)) {
		t.Errorf("changefeed sighting: %v", at)
	}
	w.u.RemoveVM(hzUUID(1), "test: destroyed")
	w.settle()
	if _, ok := w.u.LastSeen(hzUUID(1)); ok {
		t.Error("a removed VM is still seen")
	}

	// A restart knows what was saved until a feed says more.
	w.inv.VMs = []dc.VM{w.inv.VMs[0]}
	w.store.Close()
	store, err := db.Open(w.path, db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if vm, ok, _ := store.VM(vm0); !ok || !vm.LastSeen.Equal(want) {
		t.Errorf("after a restart: stored last seen %v", vm.LastSeen)
	}
}
