package feeds_test

import (
	"testing"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// The guard judges the VMs missing from a listing by listing: one that
// comes back short is held, while successive listings that each find a
// few VMs gone (destroys the changefeed missed, in a small data center)
// are believed, however many they add up to within the window.
//
// 60 VMs; five listings within a minute each miss five more (25 in all,
// over 20 VMs and 25 % of those stored, were they counted together): all
// are removed. Then one listing misses 25 at once: held.
func TestUnlistedJudgedByListing(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 60, Seed: 11})
	store, u := windowUpdater(t, time.Millisecond)
	u.SetInventory(inv, "load")
	flushAll(t, u)
	list := func(vms []dc.VM) {
		l := *inv
		l.VMs = vms
		l.Listing = u.BeginListing()
		u.SetInventory(&l, "vmapi full listing")
		flushAll(t, u)
	}
	stored := func(vms []dc.VM) (n int) {
		for _, vm := range vms {
			if _, ok, err := store.VM(vm.UUID); err != nil {
				t.Fatal(err)
			} else if ok {
				n++
			}
		}
		return n
	}

	for gone := 5; gone <= 25; gone += 5 {
		list(inv.VMs[gone:])
		if held := u.HeldRemovals()["unlisted"]; held != 0 {
			t.Fatalf("a listing missing %d VMs, 5 more than the one before: %d held, want none (%+v)", gone, held, u.RemovalGuard().History)
		}
		if n := stored(inv.VMs[:gone]); n != 0 {
			t.Fatalf("a listing missing %d VMs: %d of them still stored", gone, n)
		}
	}

	list(inv.VMs[50:]) // 25 more at once
	if held := u.HeldRemovals()["unlisted"]; held != 25 {
		t.Errorf("a listing missing 25 of the 35 VMs left: %d held, want 25", held)
	}
	if n := stored(inv.VMs[25:50]); n != 25 {
		t.Errorf("the short listing's VMs: %d of 25 still stored", n)
	}
}
