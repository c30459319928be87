package db

import (
	"testing"
	"time"
)

// Hysteresis state rides in a change set: stored with the records, read
// back after a reopen, deleted by nil, and a change set holding only
// state touches no zone (no serial, no journal entry, catalog included).
func TestHysteresisInChangeSet(t *testing.T) {
	d, clk := openTest(t, Options{})
	cfg := testConfig()
	cfg.Catalog = &CatalogConfig{Name: "catalog.cns", Apex: testApex("invalid.")}
	mustCommit(t, d, &ChangeSet{Zones: cfg, VMs: []VMChange{{UUID: vm1, Records: []Record{rec(t, "dc.example.com", "web.svc.dc.example.com. 30 IN A 10.0.0.1")}}},
		Hysteresis: map[string][]byte{"owner/web": []byte(`{"v":1}`), "owner/api": []byte(`{"v":2}`)}})
	before, err := d.Zones()
	if err != nil {
		t.Fatal(err)
	}

	clk.t = clk.t.Add(time.Minute)
	c := mustCommit(t, d, &ChangeSet{Hysteresis: map[string][]byte{"owner/web": []byte(`{"v":3}`), "owner/api": nil}})
	if len(c.Zones) != 0 {
		t.Errorf("a state-only change set touched zones: %+v", c.Zones)
	}
	after, err := d.Zones()
	if err != nil {
		t.Fatal(err)
	}
	for i := range before {
		if before[i].Serial != after[i].Serial {
			t.Errorf("zone %s serial %d → %d", before[i].Name, before[i].Serial, after[i].Serial)
		}
	}

	path := d.Path()
	d.Close()
	d, err = Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, err := d.Hysteresis()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got["owner/web"]) != `{"v":3}` {
		t.Errorf("stored state %q, want owner/web only, v 3", got)
	}
	if probs, err := d.Check(); err != nil || len(probs) > 0 {
		t.Errorf("check: %v %q", err, probs)
	}
}

func TestHysteresisEmptyStore(t *testing.T) {
	d, _ := openTest(t, Options{})
	got, err := d.Hysteresis()
	if err != nil || len(got) != 0 {
		t.Errorf("Hysteresis() = %q, %v on a new store", got, err)
	}
}
