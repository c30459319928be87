package file

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/records"
)

// FuzzInventory: dc.ParseInventory takes any bytes without panicking, and whatever it
// accepts goes through the records rules and into a store without a panic
// or a failed commit (a bad inventory is refused by dc.ParseInventory, never by the
// store).
func FuzzInventory(f *testing.F) {
	demo, err := os.ReadFile("../../testdata/inventory.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(demo)
	for _, s := range []string{
		`{}`, `{"vms": []}`, `{"vms": [{}]}`, `{"vms": [`, `{"users": [{"uuid": "nope"}]}`, `{"other": 1}`,
		`{"vms": [{"uuid": "b752d788-c0e4-4307-8c56-353a4ea66c02", "nics": "none"}]}`,
		`{"vms": [{"uuid": "b752d788-c0e4-4307-8c56-353a4ea66c02", "owner_uuid": "930896af-bf8c-48d4-885c-6573a94b1853", "state": "running",
		  "alias": "x", "tags": {"triton.cns.services": "web:80"}, "nics": [{"ip": "10.0.0.1", "network_uuid": "c66bd90b-6e21-4a55-a4b5-18f6010c6b14"}]}],
		  "users": [{"uuid": "930896af-bf8c-48d4-885c-6573a94b1853", "login": "a", "triton_cns_enabled": "true"}],
		  "networks": [{"uuid": "c66bd90b-6e21-4a55-a4b5-18f6010c6b14", "name": "n", "subnet": "10.0.0.0/8"}]}`,
	} {
		f.Add([]byte(s))
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := db.Open(filepath.Join(f.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	apex := db.Apex{MName: "ns.example.com.", RName: "hostmaster.example.com.", Refresh: 30, Retry: 60,
		Expire: 2592000, Minimum: 30, SOATTL: 30, NS: []string{"ns.example.com."}, NSTTL: 3600}
	rc := records.Config{UseAlias: true, UseLogin: true, Zones: []records.Zone{
		{Name: "pub.example.com", Networks: []string{"c66bd90b-6e21-4a55-a4b5-18f6010c6b14"}},
		{Name: "all.example.com", Networks: []string{"*"}},
	}}
	u, err := feeds.NewUpdater(store, feeds.Options{Records: rc, Logger: log,
		Zones: db.ZoneConfig{Forward: map[string]db.Apex{"pub.example.com": apex, "all.example.com": apex}, Reverse: apex}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := dc.ParseInventory(data)
		if err != nil {
			if inv != nil {
				t.Fatalf("ParseInventory returned an inventory and an error: %v", err)
			}
			return
		}
		// Written out as JSON, an accepted inventory parses again, and
		// from then on it is a fixed point (the first pass only spells
		// absent lists as empty ones).
		out, err := json.Marshal(inv)
		if err != nil {
			t.Fatalf("an accepted inventory does not marshal: %v", err)
		}
		again, err := dc.ParseInventory(out)
		if err != nil {
			t.Fatalf("an accepted inventory, written out, is refused (%v):\n%s", err, out)
		}
		out2, _ := json.Marshal(again)
		third, err := dc.ParseInventory(out2)
		if err != nil {
			t.Fatalf("an accepted inventory, written out twice, is refused (%v):\n%s", err, out2)
		}
		if out3, _ := json.Marshal(third); !bytes.Equal(out3, out2) {
			t.Fatalf("an accepted inventory does not survive a round trip:\n%s\n%s", out2, out3)
		}
		// It commits whole: nothing pending, the updater knows exactly
		// its VMs, and the store's zones, serials and journals agree.
		u.SetInventory(inv, "fuzz")
		for range 100 {
			if u.Pending() == 0 {
				break
			}
			if err := u.Flush(); err != nil {
				t.Fatalf("an accepted inventory failed to commit: %v", err)
			}
		}
		if n := u.Pending(); n != 0 {
			t.Fatalf("%d VMs still pending after the commits", n)
		}
		want := map[string]bool{}
		for _, vm := range inv.VMs {
			want[strings.ToLower(vm.UUID)] = true
		}
		got := map[string]bool{}
		for _, id := range u.VMUUIDs() {
			got[strings.ToLower(id)] = true
		}
		if !maps.Equal(got, want) {
			t.Fatalf("the updater holds %d VMs, the inventory has %d", len(got), len(want))
		}
		if problems, err := store.Check(); err != nil || len(problems) > 0 {
			t.Fatalf("db check after the commit: %v %q", err, problems)
		}
	})
}
