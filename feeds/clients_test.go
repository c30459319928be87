package feeds_test

import (
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/records"
)

// With client networks configured the updater commits each listed VM's
// identifying addresses and owner, follows an owner change at once, and
// drops them when the VM goes.
func TestUpdaterClients(t *testing.T) {
	const other = "0c000000-0000-4000-8000-00000000000c"
	var inv dc.Inventory
	inv.Users = []dc.User{{UUID: hzOwner, Login: "alice", TritonCNSEnabled: "true", ApprovedForProvisioning: "true"},
		{UUID: other, Login: "bob", TritonCNSEnabled: "true", ApprovedForProvisioning: "true"}}
	inv.Servers = []dc.Server{{UUID: hzServer, Hostname: "cn1", Setup: true, Status: "running"}}
	inv.VMs = []dc.VM{hzVM(0), hzVM(1)}

	store, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var updates []db.ClientUpdate
	store.OnCommit(func(c *db.Committed) { updates = append(updates, c.Clients...) })
	zc := db.ZoneConfig{Forward: map[string]db.Apex{hzZone: {MName: "ns." + hzZone + ".", RName: "hostmaster." + hzZone + ".",
		Refresh: 30, Retry: 60, Expire: 86400, Minimum: 30, SOATTL: 30, NS: []string{"ns." + hzZone + "."}, NSTTL: 3600}}}
	u, err := feeds.NewUpdater(store, feeds.Options{
		Records: records.Config{Zones: []records.Zone{{Name: hzZone, Networks: []string{"*"}}},
			ClientNetworks: []string{"d0d0d0d0-0000-4000-8000-000000000001"}},
		Zones: zc, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	flush := func() {
		t.Helper()
		for range 10 {
			if err := u.Flush(); err != nil {
				t.Fatal(err)
			}
			if u.Pending() == 0 {
				return
			}
		}
		t.Fatal("still pending")
	}
	stored := func() []string {
		var out []string
		store.Clients(func(vm string, c db.Client) error {
			for _, a := range c.Addrs {
				out = append(out, vm+" "+c.Owner+" "+a.Addr.String())
			}
			return nil
		})
		return out
	}
	inv2 := inv
	u.SetInventory(&inv2, "test inventory")
	flush()
	want := []string{hzUUID(0) + " " + hzOwner + " 10.0.0.10", hzUUID(1) + " " + hzOwner + " 10.0.0.11"}
	if got := stored(); !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}

	vm := inv.VMs[1]
	vm.OwnerUUID = other
	u.SetVM(&vm, "test: new owner")
	updates = nil
	flush()
	want[1] = hzUUID(1) + " " + other + " 10.0.0.11"
	if got := stored(); !slices.Equal(got, want) {
		t.Errorf("after the owner change: stored %q, want %q", got, want)
	}
	if len(updates) != 1 || updates[0].Old.Owner != hzOwner || updates[0].New.Owner != other {
		t.Errorf("commit reported %+v, want vm 1 from %s to %s", updates, hzOwner, other)
	}

	u.RemoveVM(hzUUID(0), "test destroy")
	flush()
	if got := stored(); !slices.Equal(got, want[1:]) {
		t.Errorf("after the destroy: stored %q, want %q", got, want[1:])
	}
}
