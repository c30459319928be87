package db

import (
	"fmt"
	"testing"
)

// Ensure the journal drops the entries an IXFR would not use (the
// difference from their serial to now at least as big as the zone, which
// serve answers with the whole zone), oldest first, and keeps the others,
// whatever their size.
func TestJournalDropsUnusableEntries(t *testing.T) {
	const z = "dc.example.com"
	d, _ := openTest(t, Options{})
	mustCommit(t, d, &ChangeSet{Zones: testConfig()})
	vm := func(i, addr int) VMChange {
		return VMChange{UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Records: []Record{
			rec(t, z, fmt.Sprintf("vm%d.dc.example.com. 30 IN A 10.%d.%d.%d", i, addr, i/256, i%256)),
		}}
	}
	batch := func(from, to, addr int) *ChangeSet {
		cs := &ChangeSet{}
		for i := from; i < to; i++ {
			cs.VMs = append(cs.VMs, vm(i, addr))
		}
		return cs
	}
	mustCommit(t, d, batch(0, 200, 0)) // 200 names, from the empty zone: 202 records ≥ 200
	if zi, _, _ := d.Zone(z); zi.JournalEntries != 0 {
		t.Errorf("a load of the whole zone kept %d journal entries, want 0", zi.JournalEntries)
	}
	var serials []uint32
	for i := range 5 { // small: 4 records each
		serials = append(serials, zoneSerial(t, d, z))
		mustCommit(t, d, batch(i, i+1, 1))
	}
	serials = append(serials, zoneSerial(t, d, z))
	mustCommit(t, d, batch(100, 160, 2)) // 122 records: with the 5 small ones 142 < 200, all kept
	if zi, _, _ := d.Zone(z); zi.JournalEntries != 6 || zi.JournalFrom != serials[0] {
		t.Errorf("after a batch of 60: %d entries from %d, want 6 from %d", zi.JournalEntries, zi.JournalFrom, serials[0])
	}
	before := zoneSerial(t, d, z)
	mustCommit(t, d, batch(100, 160, 3)) // 122 more: from the previous batch 244 ≥ 200
	zi, _, _ := d.Zone(z)
	if zi.JournalEntries != 1 || zi.JournalFrom != before {
		t.Errorf("after a second batch of 60: %d entries from %d, want 1 from %d", zi.JournalEntries, zi.JournalFrom, before)
	}
	if _, ok, _ := d.Journal(z, serials[5]); ok {
		t.Error("an IXFR from before the first batch is still served from the journal")
	}
	if e, ok, err := d.Journal(z, before); !ok || err != nil || len(e) != 1 || len(e[0].Added) != 60 {
		t.Errorf("journal from %d: ok %v err %v, %d entries", before, ok, err, len(e))
	}
	if probs, err := d.Check(); err != nil || len(probs) != 0 {
		t.Errorf("check: %v %v", err, probs)
	}
	for _, c := range []struct {
		records, names int
		want           bool
	}{{63, 0, true}, {64, 64, false}, {64, 65, true}, {1000, 999, false}} {
		if got := IXFRWorthIt(c.records, c.names); got != c.want {
			t.Errorf("IXFRWorthIt(%d, %d) = %v", c.records, c.names, got)
		}
	}
}
