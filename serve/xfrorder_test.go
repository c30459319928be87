package serve

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

// Ensure a warm AXFR sends an owner's names together (grouped by the label
// below the apex, which the table's hash order scatters), every record
// once, SOA first and last, and the same records to transfers that run at
// once (the first builds the order the others wait for).
func TestAXFRGroupsOwners(t *testing.T) {
	d, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	const owners, perOwner = 12, 30
	var recs []db.Record
	for o := range owners {
		owner := fmt.Sprintf("%08x-1111-4000-8000-%012x", o, o)
		for i := range perOwner {
			inst := fmt.Sprintf("vm%d.inst.%s.%s.", i, owner, zoneName)
			recs = append(recs,
				db.Record{Zone: zoneName, RR: mustRR(t, fmt.Sprintf("%s 30 IN A 10.%d.0.%d", inst, o, i))},
				db.Record{Zone: zoneName, RR: mustRR(t, fmt.Sprintf("web%d.inst.%s.%s. 30 IN A 10.%d.0.%d", i, owner, zoneName, o, i))},
				db.Record{Zone: zoneName, RR: mustRR(t, fmt.Sprintf("svc%d.svc.%s.%s. 30 IN SRV 0 10 443 %s", i/5, owner, zoneName, inst))},
				db.Record{Zone: zoneName, RR: mustRR(t, fmt.Sprintf("vm%d-%d.cmon.%s. 30 IN CNAME cmon.%s.", o, i, zoneName, zoneName))})
		}
	}
	if _, err := d.Commit(&db.ChangeSet{Zones: &db.ZoneConfig{Forward: map[string]db.Apex{zoneName: testApex()}, Reverse: testApex()},
		VMs: []db.VMChange{{UUID: vmA, Records: recs}}}); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Listen: []string{"127.0.0.1:0"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Access: Access{AllowTransfer: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Warm(); err != nil {
		t.Fatal(err)
	}
	_, tcp := s.Addrs()

	results := make([][]dns.RR, 3)
	errs := make([]error, len(results))
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i], errs[i] = transfer(t, tcp[0], "127.0.0.1", axfrMsg(), nil) })
	}
	wg.Wait()
	for i, rrs := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if want := 2 + 2 + len(recs); len(rrs) != want {
			t.Fatalf("transfer %d: %d records, want %d", i, len(rrs), want)
		}
		if rrs[0].Header().Rrtype != dns.TypeSOA || rrs[len(rrs)-1].Header().Rrtype != dns.TypeSOA || rrs[1].Header().Rrtype != dns.TypeNS {
			t.Fatalf("transfer %d: order %s, %s ... %s", i, rrs[0], rrs[1], rrs[len(rrs)-1])
		}
		seen := map[string]bool{}
		done := map[string]bool{} // groups already left
		current := ""
		for _, rr := range rrs[2 : len(rrs)-1] {
			if k := rr.String(); seen[k] {
				t.Fatalf("transfer %d: %s twice", i, k)
			} else {
				seen[k] = true
			}
			if rr.Header().Name == zoneName+"." {
				continue // the apex's NS records
			}
			labels := dns.SplitDomainName(strings.TrimSuffix(rr.Header().Name, "."+zoneName+"."))
			group := labels[len(labels)-1]
			if group == current {
				continue
			}
			if done[group] {
				t.Fatalf("transfer %d: the names below %s are not together (%s after %s)", i, group, rr.Header().Name, current)
			}
			done[current], current = true, group
		}
		if len(done) != owners+1 { // the empty start, and all groups but the last: the owners and cmon
			t.Errorf("transfer %d: %d groups, want %d", i, len(done), owners+1)
		}
		for j := range rrs {
			if rrs[j].String() != results[0][j].String() {
				t.Fatalf("transfer %d differs from transfer 0 at record %d: %s, %s", i, j, rrs[j], results[0][j])
			}
		}
	}
}

// Ensure a name's group key is the label below the apex, followed by the
// second one for deeper names, and a name that is not below the apex is
// its own key.
func TestGroupKey(t *testing.T) {
	apex, _ := db.ZoneWire("dc.example.com")
	for _, c := range []struct{ name, want string }{
		{"a.b.owner.dc.example.com", "\x05owner\x01b"},
		{"x.inst.owner.dc.example.com", "\x05owner\x04inst"},
		{"inst.owner.dc.example.com", "\x05owner"},
		{"owner.dc.example.com", "\x05owner"},
		{"x.cmon.dc.example.com", "\x04cmon"},
	} {
		w, _ := db.ZoneWire(c.name)
		if got := groupKey(nil, w, len(apex)); string(got) != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	odd := []byte{3, 'a', 'b', 'c', 0}
	if got := groupKey([]byte("x"), odd, len(odd)+4); string(got) != "x"+string(odd) {
		t.Errorf("name shorter than the apex: %q", got)
	}
}

// Ensure sortByHead sorts like slices.SortFunc, for runs of every length
// around its thresholds (insertion sort, quicksort, radix), with many
// equal heads and with none.
func TestSortByHead(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 36))
	for _, n := range []int{0, 1, 2, 3, 15, 16, 17, 18, 40, 100, 256, 257, 3000} {
		for _, distinct := range []int{2, 7, 1 << 30, 0} {
			a := make([]orderItem, n)
			for i := range a {
				a[i] = orderItem{head: rnd.Uint64(), ref: uint32(i)}
				if distinct > 0 {
					a[i].head = uint64(rnd.IntN(distinct)) << 40
				}
			}
			want := slices.Clone(a)
			slices.SortStableFunc(want, func(x, y orderItem) int { return cmp.Compare(x.head, y.head) })
			var scratch []orderItem
			sortByHead(a, &scratch)
			seen := make([]bool, n)
			for i := range a {
				if a[i].head != want[i].head {
					t.Fatalf("n %d, %d heads: at %d head %d, want %d", n, distinct, i, a[i].head, want[i].head)
				}
				if seen[a[i].ref] {
					t.Fatalf("n %d: item %d twice", n, a[i].ref)
				}
				seen[a[i].ref] = true
			}
		}
	}
}
