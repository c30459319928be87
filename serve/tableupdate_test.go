package serve

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// randomName is a name of one to four labels from small alphabets under
// apex, so that names share parents and some parents are empty
// non-terminals.
func randomName(t testing.TB, rng *rand.Rand, apex string) string {
	var s string
	for range 1 + rng.IntN(4) {
		s += fmt.Sprintf("l%d.", rng.IntN(8))
	}
	return string(wireName(t, s+apex))
}

// A table changed commit after commit by update holds what buildTable
// builds from the final names: the same nodes, records and child counts
// (empty non-terminals appear and go), through every path update takes
// (a few shards rebuilt, or the table reshaped when its size changes
// much).
func TestTableUpdateMatchesBuild(t *testing.T) {
	const apexName = "dc.example.com"
	apex := wireName(t, apexName)
	rng := rand.New(rand.NewPCG(3, 4))
	content := map[string][]byte{}
	var tbl *table
	for step := range 60 {
		changes := map[string][]byte{}
		n := 1 + rng.IntN(40)
		if step%15 == 0 {
			n = 400 // big enough to reshape the table
		}
		for range n {
			name := randomName(t, rng, apexName)
			if _, ok := content[name]; ok && rng.IntN(3) == 0 {
				changes[name] = nil // removed
				continue
			}
			changes[name] = bytes.Repeat([]byte{byte(step)}, 10+rng.IntN(30))
		}
		tbl = tbl.update(apex, changes)
		for name, rrs := range changes {
			if len(rrs) == 0 {
				delete(content, name)
			} else {
				content[name] = rrs
			}
		}
		names := slices.Sorted(maps.Keys(content))
		rrs := make([][]byte, len(names))
		for i, name := range names {
			rrs[i] = content[name]
		}
		if d := tableDiff(tbl, buildTable(apex, names, rrs)); d != "" {
			t.Fatalf("step %d: %s", step, d)
		}
		for name, r := range content {
			if found, ok := tbl.lookup([]byte(name)); !ok || !bytes.Equal(found, r) {
				t.Fatalf("step %d: lookup %x = %x, %v", step, name, found, ok)
			}
		}
	}
}

// BenchmarkTableUpdate is one commit of a busy data center reaching a
// zone's table: 200 changed names in a zone of 60k names (20k VMs, as
// bench/busydc.sh) or 300k (100k VMs). Only the shards the changes fall
// in are rebuilt; their size, not the zone's, sets the cost.
func BenchmarkTableUpdate(b *testing.B) {
	for _, n := range []int{60_000, 300_000} {
		b.Run(fmt.Sprintf("names=%d", n), func(b *testing.B) { benchTableUpdate(b, n) })
	}
}

func benchTableUpdate(b *testing.B, n int) {
	const apexName = "dc.example.com"
	apex := wireName(b, apexName)
	rng := rand.New(rand.NewPCG(5, 6))
	names := make([]string, 0, n)
	changes := map[string][]byte{}
	for i := range cap(names) {
		name := string(wireName(b, fmt.Sprintf("%08x-0000-4000-8000-%012x.inst.owner%d.%s", i, i, i%2000, apexName)))
		names = append(names, name)
		changes[name] = bytes.Repeat([]byte{1}, 40)
	}
	tbl := (*table)(nil).update(apex, changes)
	batches := make([]map[string][]byte, 16)
	for i := range batches {
		batches[i] = map[string][]byte{}
		for range 200 {
			batches[i][names[rng.IntN(len(names))]] = bytes.Repeat([]byte{byte(i)}, 40)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		tbl.update(apex, batches[i%len(batches)])
	}
}

// batchPrefetch's last stage points, for each name in the order added, at
// the name and records of the node in the name's first slot (the one its
// lookup compares first: its own node, unless another name took the slot);
// a name whose first slot is empty drops out there, and names past the
// batch's size are not taken.
func TestBatchPrefetchStages(t *testing.T) {
	apex := wireName(t, "dc.example.")
	var names []string
	var rrs [][]byte
	for i := range 3000 {
		names = append(names, string(wireName(t, fmt.Sprintf("h%d.inst.o.dc.example.", i))))
		rrs = append(rrs, []byte{0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 10, 0, byte(i >> 8), byte(i)})
	}
	tbl := buildTable(apex, names, rrs)
	own, empty := 0, 0
	for batch := range 10 {
		var p batchPrefetch
		var want []uintptr
		for i := range udpBatch + 5 {
			name := wireName(t, fmt.Sprintf("h%d.inst.o.dc.example.", (batch*1000+i*97)%3000))
			if i%3 == 0 {
				name = wireName(t, fmt.Sprintf("nope%d.inst.o.dc.example.", batch*100+i))
			}
			if i < udpBatch {
				h := hashName(name)
				s := tbl.shards[tbl.shardOf(h)]
				v := s.slots[h&uint64(len(s.slots)-1)]
				if v == 0 {
					empty++
				} else {
					want = append(want, uintptr(unsafe.Pointer(&s.data[s.nodes[v-1].off])))
					if _, nd := tbl.find(name, h); nd == &s.nodes[v-1] {
						own++
					}
				}
			}
			p.add(tbl, name)
		}
		p.run()
		if p.n != udpBatch {
			t.Errorf("%d lookups queued, want %d", p.n, udpBatch)
		}
		if got := p.addrs[:len(want)]; !slices.Equal(got, want) {
			t.Fatalf("last stage prefetches %x, want %x", got, want)
		}
	}
	// The case the prefetch is for, and the one it stops early on, occur
	// (the hash seed differs from run to run).
	if own < 100 || empty < 10 {
		t.Errorf("%d names found in their first slot, %d first slots empty", own, empty)
	}
}
