package tui

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/records"
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
	// A peer in the form the DNS server stores it.
	peer := fmt.Sprintf(`{"address":"192.0.2.53","version":"9.18.28","zones":{%q:{"serial":%d,"last_transfer":%q,"last_kind":"AXFR","axfr":1,"ixfr":0}},"notify_failures":0,"counters":{"axfr":1}}`,
		cnsZone, zi.Serial-5, now.Add(-time.Hour).Format(time.RFC3339Nano))
	if err := store.SavePeers(map[string][]byte{"192.0.2.53": []byte(peer)}); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// openDemo opens demoDB as admin's offline read model. Package main gives
// the real one serve's decoder of stored peers; the stored form's fields
// carry the API's names, so the test decodes them straight.
func openDemo(t *testing.T) *admin.DBModel {
	src, err := admin.OpenDB(demoDB(t), func(b []byte) (admin.Peer, error) {
		var p admin.Peer
		err := json.Unmarshal(b, &p)
		return p, err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	src.Now = fixedClock
	return src
}

// offline names the file the same way on every run.
type offline struct{ *admin.DBModel }

func (offline) Describe() string { return "db cns.db (read-only)" }

// The UI over a db file: no periodic refresh, the same pages.
func TestOfflineScreens(t *testing.T) {
	src := openDemo(t)
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
