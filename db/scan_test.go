package db

import (
	"fmt"
	"slices"
	"testing"
)

// Ensure reading a zone a chunk at a time gives the names ScanZone gives,
// in the same order, each once, with the zone's serial; and that a commit
// between two chunks shows in the serial.
func TestScanZoneChunk(t *testing.T) {
	d, _ := openTest(t, Options{})
	const z = "dc.example.com"
	var vms []VMChange
	for i := range 300 {
		vms = append(vms, VMChange{UUID: fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i), Records: []Record{
			rec(t, z, fmt.Sprintf("vm%d.inst.owner%d.dc.example.com. 30 IN A 10.0.%d.%d", i, i%7, i/256, i%256)),
			rec(t, z, fmt.Sprintf("svc%d.svc.owner%d.dc.example.com. 30 IN A 10.0.%d.%d", i%11, i%7, i/256, i%256)),
		}})
	}
	mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: vms})
	var want []string
	if err := d.ScanZone(z, func(owner []byte, rrs RRs) error {
		want = append(want, fmt.Sprintf("%s %x", WireToString(owner), []byte(rrs)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(want) != 300+77 {
		t.Fatalf("ScanZone: %d names, want %d", len(want), 300+77)
	}
	serial := zoneSerial(t, d, z)
	for _, limit := range []int{1, 100, 1000, 1 << 20} {
		var got []string
		var after []byte
		chunks := 0
		for {
			next, s, err := d.ScanZoneChunk(z, after, limit, func(owner []byte, rrs RRs) error {
				got = append(got, fmt.Sprintf("%s %x", WireToString(owner), []byte(rrs)))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if s != serial {
				t.Fatalf("limit %d: serial %d, want %d", limit, s, serial)
			}
			chunks++
			if next == nil {
				break
			}
			after = next
		}
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: %d names in %d chunks, not ScanZone's %d", limit, len(got), chunks, len(want))
		}
		if limit == 1 && chunks != len(want) {
			t.Errorf("limit 1: %d chunks, want one per name (%d)", chunks, len(want))
		}
	}

	next, _, err := d.ScanZoneChunk(z, nil, 100, func([]byte, RRs) error { return nil })
	if err != nil || next == nil {
		t.Fatalf("first chunk: next %x, %v", next, err)
	}
	mustCommit(t, d, &ChangeSet{VMs: []VMChange{{UUID: vms[0].UUID}}})
	if _, s, err := d.ScanZoneChunk(z, next, 100, func([]byte, RRs) error { return nil }); err != nil || s == serial {
		t.Errorf("after a commit: serial %d (was %d), %v; want it changed", s, serial, err)
	}
}
