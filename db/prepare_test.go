package db

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/miekg/dns"
)

// A prepared change set commits exactly as the same one unprepared: the
// same problems in the same order, the same records, the same journal.
func TestPreparedRecordsCommitTheSame(t *testing.T) {
	change := func() []VMChange {
		return []VMChange{{UUID: vm1, Records: []Record{
			rec(t, "nowhere.example", "a.nowhere.example. 30 IN A 10.0.0.1"),
			rec(t, "dc.example.com", "a.other.example. 30 IN A 10.0.0.1"),
			rec(t, "dc.example.com", "Ok.DC.example.com. 30 IN A 10.0.0.1"),
			rec(t, "dc.example.com", "ok.dc.example.com. 30 IN CNAME Target.dc.example.com."),
			{Zone: "dc.example.com", RR: rr(t, "bad.dc.example.com. 30 IN A 10.0.0.2"), Pref: 200},
			rec(t, "dc.example.com", "x.y.dc.example.com. 30 IN TXT \"hello\""),
			rec(t, "10.in-addr.arpa", "1.0.0.10.in-addr.arpa. 30 IN PTR ok.dc.example.com."),
			rec(t, "dc.example.com", "dc.example.com. 30 IN A 10.0.0.3"), // the apex: not below
		}}}
	}
	cfg := testConfig()
	cfg.Reverse = testApex()
	var got []*Committed
	for _, prepare := range []bool{false, true} {
		d, _ := openTest(t, Options{})
		vms := change()
		if prepare {
			for i := range vms {
				PrepareRecords(&vms[i], func(j int, wire []byte) {
					buf := make([]byte, 512)
					n, err := dns.PackRR(vms[i].Records[j].RR, buf, 0, nil, false)
					if err != nil || !bytes.Equal(wire, buf[:n]) {
						t.Errorf("record %d passed packed as %x, packs as %x (%v)", j, wire, buf[:n], err)
					}
				})
				for _, r := range vms[i].Records {
					if r.wire == nil {
						t.Fatalf("%s not prepared", r.RR)
					}
				}
			}
		}
		c := mustCommit(t, d, &ChangeSet{Zones: cfg, VMs: vms})
		got = append(got, c)
		if len(c.Problems) != 4 {
			t.Errorf("prepared %v: problems %q, want 4", prepare, c.Problems)
		}
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("unprepared commit %+v\nprepared commit %+v", got[0], got[1])
	}
}
