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

// Ensure InstanceName tells a VM's instance names (and their variants)
// from service names, CMON names and names outside the zone, whatever
// the labels' words.
func TestInstanceName(t *testing.T) {
	const z = "dc.example.com"
	for _, tc := range []struct {
		owner string
		want  bool
	}{
		{"web.inst.bob.dc.example.com.", true},
		{"5e1f0000-0000-4000-8000-000000000001.inst.0d8a1c2e.dc.example.com.", true},
		{"external.web.inst.bob.dc.example.com.", true},
		{"_acme-challenge.web.inst.bob.dc.example.com.", true},
		{"svc.inst.bob.dc.example.com.", true},  // an instance called svc
		{"inst.svc.bob.dc.example.com.", false}, // a service called inst
		{"web.svc.inst.dc.example.com.", false}, // an owner called inst
		{"web.svc.bob.dc.example.com.", false},
		{"external.web.svc.bob.dc.example.com.", false},
		{"5e1f0000-0000-4000-8000-000000000001.cmon.dc.example.com.", false},
		{"inst.bob.dc.example.com.", false},
		{"web.inst.bob.other.example.com.", false},
		{"web.inst.bobdc.example.com.", false},
	} {
		if got := InstanceName(tc.owner, z); got != tc.want {
			t.Errorf("InstanceName(%s) = %v, want %v", tc.owner, got, tc.want)
		}
	}
}
