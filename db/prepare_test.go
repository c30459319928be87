package db

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	bolt "go.etcd.io/bbolt"
)

// A prepared change set commits exactly as the same one unprepared: the
// same problems in the same order, the same records, the same journal,
// the same file content (every bucket's keys and values). vm1 has a
// record in a zone that is not configured, so its entry is encoded in
// the commit; vm2's is the one encoded ahead. vm3's records are all
// storable, so they are kept compact (preparedRecords), one of them in a
// zone that is not configured; vm4's are compact and all committed.
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
		}}, {UUID: vm2, Meta: []byte("meta"), Records: []Record{
			rec(t, "dc.example.com", "two.dc.example.com. 30 IN A 10.0.0.4"),
			rec(t, "10.in-addr.arpa", "4.0.0.10.in-addr.arpa. 30 IN PTR two.dc.example.com."),
			{Zone: "dc.example.com", RR: rr(t, "bad2.dc.example.com. 30 IN A 10.0.0.2"), Pref: 200},
			rec(t, "dc.example.com", "Two.dc.example.com. 30 IN TXT \"22222222-2222-4222-8222-222222222222\""),
			rec(t, "dc.example.com", "dc.example.com. 30 IN A 10.0.0.4"),
			rec(t, "dc.example.com", "2.svc.dc.example.com. 30 IN A 10.0.0.4"),
		}}, {UUID: vm3, Meta: []byte("meta3"), Records: []Record{
			rec(t, "dc.example.com", "three.dc.example.com. 30 IN A 10.0.0.5"),
			rec(t, "nowhere.example", "three.nowhere.example. 30 IN A 10.0.0.5"),
			{Zone: "10.in-addr.arpa", RR: rr(t, "5.0.0.10.in-addr.arpa. 30 IN PTR three.dc.example.com."), Pref: 3, Stamp: 77},
		}}, {UUID: vm4, Meta: []byte("meta4"), Records: []Record{
			rec(t, "dc.example.com", "four.dc.example.com. 30 IN A 10.0.0.6"),
			rec(t, "dc.example.com", "four.dc.example.com. 30 IN TXT \"44444444-4444-4444-8444-444444444444\""),
			{Zone: "dc.example.com", RR: rr(t, "_x._tcp.four.dc.example.com. 30 IN SRV 0 10 80 four.dc.example.com."), Pref: 1, Stamp: 5},
		}}}
	}
	cfg := testConfig()
	cfg.Reverse = testApex()
	var got []*Committed
	var files [][]string
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
				if compact := vms[i].prepared != nil && vms[i].Records == nil; compact != (i >= 2) || vms[i].Meta != nil {
					t.Fatalf("%s: records compact %v, meta %q", vms[i].UUID, compact, vms[i].Meta)
				}
			}
		}
		if prepare && (vms[0].entry == nil || vms[1].entry == nil || vms[2].entry == nil || vms[3].entry == nil) {
			t.Fatal("entries not encoded ahead")
		}
		c := mustCommit(t, d, &ChangeSet{Zones: cfg, VMs: vms})
		got = append(got, c)
		files = append(files, dumpFile(t, d))
		if len(c.Problems) != 7 {
			t.Errorf("prepared %v: problems %q, want 7", prepare, c.Problems)
		}
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("unprepared commit %+v\nprepared commit %+v", got[0], got[1])
	}
	if !slices.Equal(files[0], files[1]) {
		t.Errorf("unprepared file:\n%s\nprepared file:\n%s", strings.Join(files[0], "\n"), strings.Join(files[1], "\n"))
	}
}

// dumpFile lists every key and value of the file, bucket by bucket.
func dumpFile(t *testing.T, d *DB) []string {
	var out []string
	var walk func(path string, b *bolt.Bucket) error
	walk = func(path string, b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(fmt.Sprintf("%s/%q", path, k), b.Bucket(k))
			}
			out = append(out, fmt.Sprintf("%s %x %x", path, k, v))
			return nil
		})
	}
	err := d.file.Load().View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(fmt.Sprintf("%q", name), b) })
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 10 {
		t.Fatalf("only %d keys in the file", len(out))
	}
	return out
}
