package tui

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/records"
	"github.com/tritondatacenter/cns/serve"
)

// demoDB writes the demo data center (testdata/inventory.json) into a db
// file on the fixed clock, with one stored peer, and returns its path.
func demoDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cns.db")
	store, err := db.Open(path, db.Options{NoSync: true, Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	apex := db.Apex{MName: "cns.us-west-1.example.com.", RName: "hostmaster.example.com.", Refresh: 30, Retry: 60,
		Expire: 2592000, Minimum: 30, SOATTL: 30, NS: []string{"cns.us-west-1.example.com."}, NSTTL: 3600}
	zc := db.ZoneConfig{Forward: map[string]db.Apex{cnsZone: apex, intZone: apex}, Reverse: apex}
	rc := records.Config{UseAlias: true, UseLogin: true, Zones: []records.Zone{
		{Name: cnsZone, Networks: []string{"c66bd90b-6e21-4a55-a4b5-18f6010c6b14"}},
		{Name: intZone, Networks: []string{"*"}},
	}}
	u, err := feeds.NewUpdater(store, feeds.Options{Records: rc, Zones: zc, Now: fixedClock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := dc.LoadInventory("../testdata/inventory.json")
	if err != nil {
		t.Fatal(err)
	}
	u.SetInventory(inv, "inventory file loaded")
	for u.Pending() > 0 {
		if err := u.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	zi, _, err := store.Zone(cnsZone)
	if err != nil {
		t.Fatal(err)
	}
	peer, _ := json.Marshal(serve.Peer{Address: "192.0.2.53", Version: "9.18.28", Counters: map[string]uint64{"axfr": 1},
		Zones: map[string]*serve.PeerZone{cnsZone: {Serial: zi.Serial - 5, LastTransfer: now.Add(-time.Hour), LastKind: "AXFR", AXFR: 1}}})
	if err := store.SavePeers(map[string][]byte{"192.0.2.53": peer}); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// The db file source reads what the server stored, read-only.
func TestDBSource(t *testing.T) {
	src, err := OpenDB(demoDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	src.Now = fixedClock
	ctx := context.Background()
	if src.Live() || !strings.HasSuffix(src.Describe(), "cns.db (read-only)") {
		t.Errorf("describe %q, live %v", src.Describe(), src.Live())
	}

	zones, err := src.Zones(ctx)
	if err != nil || len(zones) != 5 {
		t.Fatalf("zones: %d, %v", len(zones), err)
	}
	var cns struct{ serial uint32 }
	for _, z := range zones {
		if z.Name == cnsZone {
			cns.serial = z.Serial
			if z.Records == 0 || z.Names == 0 || z.LastChange.IsZero() {
				t.Errorf("zone %s: %+v", z.Name, z)
			}
		}
	}
	if _, err := src.History(ctx, cnsZone, 10); err != nil {
		t.Errorf("history: %v", err)
	}

	res, err := src.SearchVMs(ctx, "carol", 10)
	if err != nil || len(res.VMs) != 2 {
		t.Fatalf("search carol: %+v %v", res, err)
	}
	vm, err := src.VM(ctx, carolWeb)
	if err != nil || vm.ListInstance || !slices.Equal(vm.Reasons, []string{"user_en_flag"}) {
		t.Errorf("vm: %+v %v", vm, err)
	}
	if _, err := src.VM(ctx, "00000000-0000-4000-8000-000000000000"); err == nil {
		t.Error("an unknown VM: no error")
	}

	peers, err := src.Peers(ctx)
	if err != nil || len(peers) != 1 {
		t.Fatalf("peers: %+v %v", peers, err)
	}
	pz := peers[0].Zones[cnsZone]
	if pz.Serial != cns.serial-5 || pz.ZoneSerial != cns.serial || pz.DriftSerials != 5 || pz.DriftSeconds != -1 {
		t.Errorf("peer zone: %+v (zone serial %d)", pz, cns.serial)
	}

	views, err := src.Services(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range views {
		if v.Service == "web" && v.Owner == alice {
			found = true
		}
	}
	if !found {
		t.Errorf("services: no web of alice in %d views", len(views))
	}
	f, err := src.Feeds(ctx)
	if err != nil || len(f.Feeds) != 0 {
		t.Errorf("feeds: %+v %v", f, err)
	}
}

// offline names the file the same way on every run.
type offline struct{ *DBSource }

func (offline) Describe() string { return "db cns.db (read-only)" }

// The UI over a db file: no periodic refresh, the same pages.
func TestOfflineScreens(t *testing.T) {
	src, err := OpenDB(demoDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	src.Now = fixedClock
	for _, tc := range []struct {
		name  string
		steps func(h *harness)
	}{
		{"vm", func(h *harness) {
			h.wait(intZone)
			h.keys("4")
			h.wait("carol-mx")
			h.keys("/", "dave", "enter")
			h.wait(`matching "dave"`)
			h.keys("enter")
			h.wait("approved")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, offline{src}, 80, 24, Options{})
			tc.steps(h)
			teatest.RequireEqualOutput(t, []byte(h.screen()))
		})
	}
}
