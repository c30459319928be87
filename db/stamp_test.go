package db

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// stamped is a VM's stamped TXT at the _grpc_config name of the tests.
func stamped(t *testing.T, vm, value string, stamp uint64) VMChange {
	r := rec(t, "dc.example.com", `_grpc_config.api.svc.o.dc.example.com. 30 IN TXT "`+value+`"`)
	r.Pref, r.Stamp = 0, stamp
	return VMChange{UUID: vm, Records: []Record{r}}
}

const grpcOwner = "_grpc_config.api.svc.o.dc.example.com."

// Ensure a type with stamped candidates is a singleton whose newest
// candidate wins, whatever order and batching the VMs arrive in, and
// that disagreeing VMs are reported.
func TestStampedSingleton(t *testing.T) {
	cases := []struct {
		name     string
		vms      []VMChange
		want     string
		disagree string // substring of the one problem, "" for none
	}{
		{"newest wins", []VMChange{stamped(t, vm1, "old", 100), stamped(t, vm2, "new", 200), stamped(t, vm3, "mid", 150)},
			"new", "3 VMs disagree (3 different records); serving the newest, vm " + vm2},
		{"newest wins although longer", []VMChange{stamped(t, vm1, "a", 100), stamped(t, vm2, "bbbbbbbb", 101)},
			"bbbbbbbb", "2 VMs disagree"},
		{"same stamp: shortest, then smallest", []VMChange{stamped(t, vm1, "bb", 7), stamped(t, vm2, "a", 7), stamped(t, vm3, "c", 7)},
			"a", "3 VMs disagree (3 different records)"},
		{"agreeing members: served once, no report", []VMChange{stamped(t, vm1, "same", 1), stamped(t, vm2, "same", 9), stamped(t, vm3, "same", 5)},
			"same", ""},
		{"two agree, one differs", []VMChange{stamped(t, vm1, "x", 1), stamped(t, vm2, "x", 3), stamped(t, vm3, "y", 2)},
			"x", "3 VMs disagree (2 different records); serving the newest, vm " + vm2},
		{"an unstamped TXT loses to any stamp", []VMChange{
			{UUID: vm1, Records: []Record{rec(t, "dc.example.com", grpcOwner+` 30 IN TXT "a"`)}}, stamped(t, vm2, "zzz", 1)},
			"zzz", ""},
	}
	for _, tc := range cases {
		orders := [][]VMChange{tc.vms, slices.Clone(tc.vms)}
		slices.Reverse(orders[1])
		for i, order := range orders {
			for _, oneByOne := range []bool{false, true} {
				d, _ := openTest(t, Options{})
				mustCommit(t, d, &ChangeSet{Zones: testConfig()})
				var probs []string
				if oneByOne {
					for _, vc := range order {
						probs = mustCommit(t, d, &ChangeSet{VMs: []VMChange{vc}}).Problems
					}
				} else {
					probs = mustCommit(t, d, &ChangeSet{VMs: order}).Problems
				}
				what := tc.name
				if i == 1 {
					what += ", reversed"
				}
				if oneByOne {
					what += ", one by one"
				}
				got := published(t, d, "dc.example.com", grpcOwner)
				if len(got) != 1 || !strings.HasSuffix(got[0], `TXT "`+tc.want+`"`) {
					t.Errorf("%s: %q, want one TXT %q", what, got, tc.want)
				}
				// The last commit touched the name, so it reports.
				switch {
				case tc.disagree == "" && len(probs) != 0:
					t.Errorf("%s: problems %q", what, probs)
				case tc.disagree != "" && (len(probs) != 1 || !strings.Contains(probs[0], grpcOwner+" TXT: "+tc.disagree)):
					t.Errorf("%s: problems %q, want one saying %q", what, probs, tc.disagree)
				}
			}
		}
	}
}

// Ensure the winner changes with the candidates, in the journal too, and
// that stamps survive a reopen.
func TestStampedSingletonChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cns.db")
	d, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: []VMChange{stamped(t, vm1, "one", 100), stamped(t, vm2, "two", 200)}})
	if got := published(t, d, "dc.example.com", grpcOwner); len(got) != 1 || !strings.HasSuffix(got[0], `"two"`) {
		t.Fatalf("got %q", got)
	}
	d.Close()
	if d, err = Open(path, Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := published(t, d, "dc.example.com", grpcOwner); len(got) != 1 || !strings.HasSuffix(got[0], `"two"`) {
		t.Fatalf("after reopen: %q", got)
	}
	// vm1 is modified later and now carries the newest stamp.
	c := mustCommit(t, d, &ChangeSet{VMs: []VMChange{stamped(t, vm1, "one", 300)}})
	if got := published(t, d, "dc.example.com", grpcOwner); len(got) != 1 || !strings.HasSuffix(got[0], `"one"`) {
		t.Fatalf("after vm1 changed: %q", got)
	}
	if len(c.Zones) != 1 || c.Zones[0].Entry == nil || len(c.Zones[0].Entry.Deleted) != 1 || len(c.Zones[0].Entry.Added) != 1 {
		t.Fatalf("journal entry: %+v", c.Zones)
	}
	// The newest leaves: the other comes back, and nobody disagrees.
	c = mustCommit(t, d, &ChangeSet{VMs: []VMChange{{UUID: vm1, Delete: true}}})
	if got := published(t, d, "dc.example.com", grpcOwner); len(got) != 1 || !strings.HasSuffix(got[0], `"two"`) {
		t.Fatalf("after vm1 left: %q", got)
	}
	if len(c.Problems) != 0 {
		t.Errorf("problems %q", c.Problems)
	}
	// A stamp change that does not change the winner changes no serial.
	serial := zoneSerial(t, d, "dc.example.com")
	mustCommit(t, d, &ChangeSet{VMs: []VMChange{stamped(t, vm2, "two", 400)}})
	if s := zoneSerial(t, d, "dc.example.com"); s != serial {
		t.Errorf("serial %d -> %d for a stamp-only change", serial, s)
	}
	if probs, err := d.Check(); err != nil || len(probs) != 0 {
		t.Errorf("check: %q, %v", probs, err)
	}
}

// Ensure candidates encode stamps compactly and read stores written
// before stamps existed.
func TestCandidateEncoding(t *testing.T) {
	a, _ := EncodeRR(rr(t, `x.dc.example.com. 30 IN TXT "a"`))
	b, _ := EncodeRR(rr(t, "x.dc.example.com. 30 IN A 10.0.0.1"))
	var id1, id2 [16]byte
	id1[0], id2[0] = 1, 2
	cs := []candidate{{vm: id1, pref: 1, rr: b}, {vm: id1, stamp: 1<<63 + 5, rr: a}, {vm: id2, pref: 127, stamp: 1, rr: a}}
	enc := encodeCandidates(cs)
	if want := 3*candFixed + 2*8 + 2*len(a) + len(b); len(enc) != want {
		t.Errorf("encoded %d bytes, want %d", len(enc), want)
	}
	got, err := decodeCandidates(enc)
	if err != nil || !slices.EqualFunc(got, cs, func(x, y candidate) bool {
		return x.vm == y.vm && x.pref == y.pref && x.stamp == y.stamp && bytes.Equal(x.rr, y.rr)
	}) {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	// The encoding before stamps: vm, pref, record.
	old := append(append(append([]byte{}, id1[:]...), 1), b...)
	if got, err := decodeCandidates(old); err != nil || len(got) != 1 || got[0].pref != 1 || got[0].stamp != 0 {
		t.Errorf("old encoding: %+v, %v", got, err)
	}
	if _, err := decodeCandidates(enc[:candFixed+8+rrFixed-1+len(b)+candFixed]); err == nil {
		t.Error("truncated stamp accepted")
	}

	d, _ := openTest(t, Options{})
	r := rec(t, "dc.example.com", "p.dc.example.com. 30 IN A 10.0.0.1")
	r.Pref = candStamped
	c := mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: []VMChange{{UUID: vm1, Records: []Record{r}}}})
	if len(c.Problems) != 1 || !strings.Contains(c.Problems[0], "pref 128 is not below 128") {
		t.Errorf("problems %q", c.Problems)
	}
}

// BenchmarkPublish derives the served records of a service name with 20
// members (A, TXT, SRV each), as every commit and warm-up does per name;
// stamped adds a disagreeing singleton TXT per member.
func BenchmarkPublish(b *testing.B) {
	for _, withStamps := range []bool{false, true} {
		var cs []candidate
		for i := range 20 {
			var id [16]byte
			id[0] = byte(i)
			for _, s := range []string{
				fmt.Sprintf("x.dc.example.com. 30 IN A 10.0.0.%d", i),
				fmt.Sprintf(`x.dc.example.com. 30 IN TXT "vm-%d"`, i),
				fmt.Sprintf("x.dc.example.com. 30 IN SRV 0 10 80 vm%d.inst.o.dc.example.com.", i),
			} {
				x, _ := dns.NewRR(s)
				rr, _ := EncodeRR(x)
				cs = append(cs, candidate{vm: id, rr: rr})
			}
			if withStamps {
				x, _ := dns.NewRR(fmt.Sprintf(`x.dc.example.com. 30 IN TXT "grpc_config=%d"`, i))
				rr, _ := EncodeRR(x)
				cs = append(cs, candidate{vm: id, stamp: uint64(1000 + i), rr: rr})
			}
		}
		p := publishPolicy{maxRRset: DefaultMaxRRset}
		b.Run(fmt.Sprintf("stamped=%v", withStamps), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.publish(cs)
			}
		})
	}
}
