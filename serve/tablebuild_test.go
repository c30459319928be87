package serve

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

// storeKey is a name's key in the store: its labels below the apex, the
// one nearest the apex first, which sorts a name before its descendants.
func storeKey(name, apex []byte) []byte {
	var starts []int
	for i := 0; i < len(name)-len(apex); i += int(name[i]) + 1 {
		starts = append(starts, i)
	}
	var key []byte
	for j := len(starts) - 1; j >= 0; j-- {
		s := starts[j]
		key = append(key, name[s:s+int(name[s])+1]...)
	}
	return key
}

func wireName(t testing.TB, s string) []byte {
	t.Helper()
	buf := make([]byte, 256)
	n, err := dns.PackDomainName(dns.Fqdn(s), buf, 0, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// tableDiff says how got differs from want (nodes, records, child
// counts), or "" when they hold the same.
func tableDiff(got, want *table) string {
	if got.names != want.names {
		return fmt.Sprintf("%d nodes, want %d", got.names, want.names)
	}
	gc, wc := tableContents(got), tableContents(want)
	if len(gc) != len(wc) {
		return fmt.Sprintf("%d distinct nodes, want %d", len(gc), len(wc))
	}
	for k, v := range wc {
		if gc[k] != v {
			return fmt.Sprintf("node %s is %q, want %q", k, gc[k], v)
		}
	}
	return ""
}

func tableContents(t *table) map[string]string {
	out := map[string]string{}
	t.each(func(name, rrs []byte, children uint32) {
		out[fmt.Sprintf("%x", name)] = fmt.Sprintf("%x/%d", rrs, children)
	})
	return out
}

// The builder fed in store order gives the table buildTable gives from
// the same names in any order: the same nodes, empty non-terminals and
// child counts, and every name found by lookup.
func TestTableBuilderMatchesBuildTable(t *testing.T) {
	apex := wireName(t, "dc.example.com")
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 5, 300, 5000} {
		seen := map[string]bool{}
		var names []string
		var rrs [][]byte
		for len(names) < n {
			// Up to four labels from small alphabets, so that names share
			// parents, some parents have records and some are empty.
			var s string
			for range 1 + rng.IntN(4) {
				s += fmt.Sprintf("l%d.", rng.IntN(10))
			}
			name := string(wireName(t, s+"dc.example.com"))
			if seen[name] {
				continue
			}
			seen[name] = true
			names = append(names, name)
			rrs = append(rrs, bytes.Repeat([]byte{byte(len(names))}, 10+rng.IntN(30)))
		}
		want := buildTable(apex, names, rrs)

		order := make([]int, len(names))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int {
			return bytes.Compare(storeKey([]byte(names[a]), apex), storeKey([]byte(names[b]), apex))
		})
		// A wrong estimate (half) still gives a working table.
		b := newTableBuilder(apex, n/2)
		for _, i := range order {
			if err := b.add([]byte(names[i]), rrs[i]); err != nil {
				t.Fatal(err)
			}
		}
		got := b.finish()
		if d := tableDiff(got, want); d != "" {
			t.Errorf("%d names: the builder's table against buildTable's: %s", n, d)
		}
		for i, name := range names {
			r, found := got.lookup([]byte(name))
			if !found || !bytes.Equal(r, rrs[i]) {
				t.Fatalf("%d names: lookup %x = %x, %v", n, name, r, found)
			}
		}
	}
}

// A name given twice (the store's order broken) is an error, not a
// second node.
func TestTableBuilderRejectsRepeat(t *testing.T) {
	apex := wireName(t, "example.com")
	b := newTableBuilder(apex, 2)
	name := wireName(t, "a.b.example.com")
	if err := b.add(name, []byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := b.add(name, []byte{2}); err == nil {
		t.Fatal("the same name twice: want an error")
	}
}
