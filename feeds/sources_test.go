package feeds_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/records"
)

// A source batch lands whole with its stored copy, and a data center's
// full inventory (a cns that aggregates its own zone and others') leaves
// the aggregated names alone.
func TestSourceBatchSurvivesInventory(t *testing.T) {
	const zone = "region.example"
	store, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	zc := db.ZoneConfig{Forward: map[string]db.Apex{zone: {MName: "ns." + zone + ".", RName: "h." + zone + ".",
		Refresh: 30, Retry: 60, Expire: 86400, Minimum: 30, SOATTL: 30, NS: []string{"ns." + zone + "."}, NSTTL: 3600}}}
	u, err := feeds.NewUpdater(store, feeds.Options{Records: records.Config{Zones: []records.Zone{{Name: zone, Networks: []string{"*"}}}}, Zones: zc})
	if err != nil {
		t.Fatal(err)
	}
	const pseudo = "0a0b0c0d-0000-8000-8000-000000000001"
	if !feeds.ExternalUUID(pseudo) || feeds.ExternalUUID("0a0b0c0d-0000-4000-8000-000000000001") {
		t.Fatal("ExternalUUID")
	}
	rr, _ := dns.NewRR("x." + zone + ". 30 IN A 10.0.0.1")
	b := feeds.SourceBatch{Source: db.SourceUpdate{Source: "r/a", State: []byte("s1"), Names: map[string][]byte{"x.a.": {1}}},
		Cause: "test"}
	b.N, b.VM = feeds.SourceVMs([]db.VMChange{{UUID: pseudo, Records: []db.Record{{Zone: zone, RR: rr}}}})
	u.SetSource(b)
	if err := u.Flush(); err != nil {
		t.Fatal(err)
	}
	lookup := func() int {
		w, _ := db.ZoneWire(zone)
		own, _ := db.ZoneWire("x." + zone)
		rrs, _, err := store.Lookup(zone, w, own)
		if err != nil {
			t.Fatal(err)
		}
		return rrs.Count()
	}
	if lookup() != 1 {
		t.Fatal("the source's record is not served")
	}
	if st, _ := store.Sources(); string(st["r/a"]) != "s1" {
		t.Fatalf("stored state %q", st)
	}
	u.SetInventory(&dc.Inventory{}, "full listing")
	if err := u.Flush(); err != nil {
		t.Fatal(err)
	}
	if lookup() != 1 {
		t.Fatal("a full inventory removed an aggregated name")
	}
}

// A source batch larger than one commit's share goes in chunks, and its
// stored copy lands with the last one.
func TestSourceBatchChunked(t *testing.T) {
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
	const n = 45000 // 20000 pseudo-VMs per commit
	b := feeds.SourceBatch{Source: db.SourceUpdate{Source: "r/a", State: []byte("s1")}, Cause: "big", N: n}
	built := 0
	b.VM = func(i int) db.VMChange { // built when its chunk goes
		built++
		rr, _ := dns.NewRR(fmt.Sprintf("n%d.%s. 30 IN A 10.0.%d.%d", i, zone, i>>8, i&255))
		return db.VMChange{UUID: fmt.Sprintf("0a0b0c0d-0000-8000-8000-%012d", i), Records: []db.Record{{Zone: zone, RR: rr}}}
	}
	u.SetSource(b)
	commits := 0
	for {
		if err := u.Flush(); err != nil {
			t.Fatal(err)
		}
		commits++
		if built != min(commits*20000, n) {
			t.Fatalf("after %d commits %d pseudo-VMs built", commits, built)
		}
		st, _ := store.Sources()
		zi, _, _ := store.Zone(zone)
		if st["r/a"] != nil {
			if zi.Names < n {
				t.Fatalf("copy stored with %d of %d names", zi.Names, n)
			}
			break
		}
		if commits > 5 {
			t.Fatal("the copy never landed")
		}
	}
	if commits != 3 {
		t.Errorf("%d commits for %d pseudo-VMs, want 3", commits, n)
	}
}
