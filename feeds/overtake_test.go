package feeds_test

import (
	"testing"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// A listing takes time, and the changes that come meanwhile overtake it:
// a listed copy older than a change does not undo it, a newer one wins, a
// VM a change removed stays removed, one a change created stays (with its
// owner, whom the listing does not name), and so does a change that lands
// between two slices of the listing being put.
func TestChangesOvertakeAListing(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 5, Seed: 9})
	at := func(vm dc.VM, alias, modified string) dc.VM {
		vm.Alias, vm.LastModified = &alias, "2026-01-01T00:00:0"+modified+".000Z"
		return vm
	}
	a, b, c, d, e := inv.VMs[0], inv.VMs[1], inv.VMs[2], inv.VMs[3], inv.VMs[4]
	newcomer := dc.User{UUID: "0e000000-0000-4000-8000-000000000001", Login: "newcomer"}
	d.OwnerUUID = newcomer.UUID

	store, u := windowUpdater(t, time.Millisecond)
	first := *inv
	first.Users = append(append([]dc.User{}, inv.Users...), newcomer)
	first.VMs = []dc.VM{at(a, "a-first", "0"), at(b, "b-first", "0"), at(c, "c-first", "0"), at(e, "e-first", "0")}
	u.SetInventory(&first, "load")
	flushAll(t, u)

	listing := *inv
	listing.Listing = u.BeginListing()
	for _, vm := range []dc.VM{at(a, "a-changed", "5"), at(b, "b-changed", "5"), at(d, "d-created", "5")} {
		u.SetVM(&vm, "changefeed")
	}
	u.RemoveVM(e.UUID, "VM unknown to VMAPI")
	listing.VMs = []dc.VM{at(a, "a-listed", "1"), at(b, "b-listed", "9"), at(c, "c-listed", "1"), at(e, "e-listed", "1")}
	u.SetSizes(0, 2)
	u.SetBetweenListingSlices(func() {
		vm := at(c, "c-during", "5")
		u.SetVM(&vm, "changefeed") // before the listing puts c
	})
	u.SetInventory(&listing, "relisting")
	flushAll(t, u)

	for id, want := range map[string]string{a.UUID: "a-changed", b.UUID: "b-listed", c.UUID: "c-during", d.UUID: "d-created", e.UUID: ""} {
		vm, ok, err := store.VM(id)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if ok {
			got = metaOf(t, vm).Alias
		}
		if got != want {
			t.Errorf("vm %s: alias %q stored, want %q", id, got, want)
		}
	}
}
