package aggregate

import (
	"path/filepath"
	"testing"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
)

// A source the config no longer lists is forgotten at start: its copy
// and its records in the region leave.
func TestForgetUnconfiguredSource(t *testing.T) {
	const zone = "region.example"
	store, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	zc := db.ZoneConfig{Forward: map[string]db.Apex{zone: {MName: "ns." + zone + ".", RName: "h." + zone + ".",
		Refresh: 30, Retry: 60, Expire: 86400, Minimum: 30, SOATTL: 30, NS: []string{"ns." + zone + "."}, NSTTL: 3600}}}
	u, err := feeds.NewUpdater(store, feeds.Options{Zones: zc})
	if err != nil {
		t.Fatal(err)
	}
	const key = zone + "/a.example"
	rr, _ := dns.NewRR("x." + zone + ". 30 IN A 10.0.0.1")
	b := feeds.SourceBatch{Source: db.SourceUpdate{Source: key, State: []byte(`{"serial":1}`), Names: map[string][]byte{"x.a.example.": {}}}}
	b.N, b.VM = feeds.SourceVMs([]db.VMChange{{UUID: pseudoUUID(key, "x.a.example."), Records: []db.Record{{Zone: zone, RR: rr}}}})
	u.SetSource(b)
	if err := u.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := New(Options{Store: store, Sink: u}).Load(); err != nil {
		t.Fatal(err)
	}
	if err := u.Flush(); err != nil {
		t.Fatal(err)
	}
	if st, _ := store.Sources(); len(st) != 0 {
		t.Errorf("sources still stored: %v", st)
	}
	if zi, _, _ := store.Zone(zone); zi.Names != 0 {
		t.Errorf("region still has %d names", zi.Names)
	}
}
