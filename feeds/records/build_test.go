package records

import (
	"testing"

	"github.com/miekg/dns"
)

// records keeps each record of a zone once, the first added (its Pref and
// Stamp), and sorts by zone, name, type and text whatever the order of
// adding.
func TestBuilderRecordsDropDuplicates(t *testing.T) {
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	b := &builder{}
	for _, r := range []Record{
		{Zone: "z", RR: rr("b.z. 30 IN A 10.0.0.2"), Pref: 3},
		{Zone: "z", RR: rr("a.z. 30 IN TXT \"x\"")},
		{Zone: "z", RR: rr("b.z. 30 IN A 10.0.0.1"), Pref: 1},
		{Zone: "y", RR: rr("b.z. 30 IN A 10.0.0.2"), Pref: 4}, // another zone: kept
		{Zone: "z", RR: rr("b.z. 30 IN A 10.0.0.2"), Pref: 5}, // duplicate: dropped
		{Zone: "z", RR: rr("b.z. 60 IN A 10.0.0.2"), Pref: 6}, // another TTL: kept
		{Zone: "z", RR: rr("a.z. 30 IN TXT \"x\""), Stamp: 9}, // duplicate: dropped
		{Zone: "z", RR: rr("b.z. 30 IN A 10.0.0.1"), Pref: 2}, // duplicate: dropped
	} {
		b.addRecord(r)
	}
	want := []struct {
		zone, text string
		pref       uint8
	}{
		{"y", "b.z.\t30\tIN\tA\t10.0.0.2", 4},
		{"z", "a.z.\t30\tIN\tTXT\t\"x\"", 0},
		{"z", "b.z.\t30\tIN\tA\t10.0.0.1", 1},
		{"z", "b.z.\t30\tIN\tA\t10.0.0.2", 3},
		{"z", "b.z.\t60\tIN\tA\t10.0.0.2", 6},
	}
	got := b.records()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		if g := got[i]; g.Zone != w.zone || g.RR.String() != w.text || g.Pref != w.pref || g.Stamp != 0 {
			t.Errorf("record %d: got %s %q pref %d stamp %d, want %s %q pref %d", i, g.Zone, g.RR.String(), g.Pref, g.Stamp, w.zone, w.text, w.pref)
		}
	}
}
