package serve

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"unsafe"
)

// table maps the owner names of one zone (absolute, lower-case wire names)
// to what they publish. It is immutable once built: a commit builds a new
// table that shares every shard the commit did not touch, so readers never
// lock and never see half a commit.
//
// A shard keeps its names and records in one byte slice and finds them
// through an open-addressing slot array, so the garbage collector sees a
// few pointers per shard instead of several per name.
type table struct {
	shards []*shard
	shift  uint // hash >> shift selects the shard
	names  int  // nodes, empty non-terminals included
	xfr    xfrOrderCache
}

type shard struct {
	slots []uint32 // 0: empty, else node index + 1
	nodes []node
	data  []byte
}

// node is one owner name: data[off:off+nameLen] is its wire name, then
// rrLen bytes of db.RRs. children counts the names directly below it, so
// a node with no records and children > 0 is an empty non-terminal.
type node struct {
	off      uint32
	rrLen    uint32
	children uint32
	nameLen  uint8
}

// entry is a node's content outside a shard, while a table is rebuilt.
type entry struct {
	rrs      []byte
	children uint32
}

// exists reports whether the name is in the zone: it has records, or
// names below it (an empty non-terminal).
func (e *entry) exists() bool { return len(e.rrs) > 0 || e.children > 0 }

var hashSeed = maphash.MakeSeed()

func hashName(name []byte) uint64 { return maphash.Bytes(hashSeed, name) }

// emptyTable returns a table without shards yet, its shard array sized
// for n names: a power of two, so that a shard holds at most
// nodesPerShard names on average.
func emptyTable(n int) *table {
	nshards := 1
	for nshards*nodesPerShard < n {
		nshards <<= 1
	}
	t := &table{shards: make([]*shard, nshards), shift: 64 - uint(bits.Len(uint(nshards-1)))}
	if nshards == 1 {
		t.shift = 64
	}
	return t
}

// nodesPerShard is the size a shard aims for: small enough that rebuilding
// one on a commit costs microseconds, large enough to keep the shard array
// small. A commit that changes k names rebuilds about k shards and copies
// the shard array; smaller shards for smaller zones (√n/8 names, 32 to
// 128) made BenchmarkTableUpdate's 200-name update at 60k names 707 →
// 320 µs, but cost 6 % of UDP capacity at 100k VMs (bench/warm-udp.sh:
// every lookup is slower with more shards), and √n/4, which left zones of
// 100k VMs at 128, showed nothing end to end in bench/busydc.sh.
const nodesPerShard = 128

// item is a name and its content, on the way into a shard.
type item struct {
	name string
	e    entry
}

// newTable builds a table holding entries (by name).
func newTable(entries map[string]entry) *table {
	items := make([]item, 0, len(entries))
	for name, e := range entries {
		items = append(items, item{name, e})
	}
	return tableOf(items)
}

// tableOf lays items out in a table sized for them, building the shards
// on every core.
func tableOf(items []item) *table {
	n := len(items)
	t := emptyTable(n)
	t.names = n
	nshards := len(t.shards)
	groups := make([][]item, nshards)
	for _, it := range items {
		i := t.shardOf(hashName([]byte(it.name)))
		groups[i] = append(groups[i], it)
	}
	workers := min(runtime.GOMAXPROCS(0), nshards)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < nshards; i += workers {
				t.shards[i] = buildShard(groups[i])
			}
		})
	}
	wg.Wait()
	return t
}

// buildTable builds the table of a zone (apex wire name) from its names
// with records, in any order, creating the empty non-terminals between
// them and the apex: a new zone. A warm-up, whose names come in store
// order, uses tableBuilder; update handles changes.
func buildTable(apex []byte, names []string, rrs [][]byte) *table {
	items := make([]item, len(names), len(names)+len(names)/4)
	index := make(map[string]int, len(names)+len(names)/4)
	for i, n := range names {
		items[i] = item{name: n, e: entry{rrs: rrs[i]}}
		index[n] = i
	}
	// Each name counts once in its parent; a parent missing is an empty
	// non-terminal, created here, which counts once in its own parent.
	for i := 0; i < len(items); i++ {
		name := items[i].name
		parent := name[int(name[0])+1:]
		if len(parent) <= len(apex) {
			continue // the apex is not a node
		}
		if j, ok := index[parent]; ok {
			items[j].e.children++
			continue
		}
		index[parent] = len(items)
		items = append(items, item{name: parent, e: entry{children: 1}})
	}
	return tableOf(items)
}

func (t *table) shardOf(h uint64) int {
	if t.shift >= 64 {
		return 0
	}
	return int(h >> t.shift)
}

// buildShard lays out items in a fresh shard.
func buildShard(items []item) *shard {
	size := 0
	for _, it := range items {
		size += len(it.name) + len(it.e.rrs)
	}
	s := newShard(len(items), size)
	for _, it := range items {
		s.add([]byte(it.name), it.e.rrs, it.e.children)
	}
	return s
}

// newShard returns an empty shard with room for n names of size bytes in
// all (names and records), its slot array at most half full.
func newShard(n, size int) *shard {
	nslots := 4
	for nslots < 2*n {
		nslots <<= 1
	}
	return &shard{slots: make([]uint32, nslots), nodes: make([]node, 0, n), data: make([]byte, 0, size)}
}

// add appends a name that is not in the shard yet.
func (s *shard) add(name, rrs []byte, children uint32) {
	s.nodes = append(s.nodes, node{off: uint32(len(s.data)), nameLen: uint8(len(name)), rrLen: uint32(len(rrs)), children: children})
	s.data = append(append(s.data, name...), rrs...)
	mask := uint64(len(s.slots) - 1)
	for i := hashName(name) & mask; ; i = (i + 1) & mask {
		if s.slots[i] == 0 {
			s.slots[i] = uint32(len(s.nodes))
			return
		}
	}
}

// rebuilt returns a copy of s with the names given (which fall in s)
// replaced by their entries in pending, or left out when they no longer
// exist. A commit rebuilds every shard it touches, so this is its cost
// per changed name: the names kept are copied as bytes, and only the
// changed ones are looked up.
func (s *shard) rebuilt(pending map[string]*entry, names []string) *shard {
	drop := make(map[uint32]bool, len(names))
	n, size := len(s.nodes), len(s.data)
	for _, name := range names {
		if i, ok := s.index([]byte(name), hashName([]byte(name))); ok {
			drop[i] = true
			n, size = n-1, size-len(name)-int(s.nodes[i].rrLen)
		}
		if e := pending[name]; e.exists() {
			n, size = n+1, size+len(name)+len(e.rrs)
		}
	}
	ns := newShard(n, size)
	for i := range s.nodes {
		if drop[uint32(i)] {
			continue
		}
		nd := &s.nodes[i]
		end := nd.off + uint32(nd.nameLen)
		ns.add(s.data[nd.off:end], s.data[end:end+nd.rrLen], nd.children)
	}
	for _, name := range names {
		if e := pending[name]; e.exists() {
			ns.add([]byte(name), e.rrs, e.children)
		}
	}
	return ns
}

// lookup finds name (lower-case wire). It returns the node's records and
// whether the node exists (records, or names below it).
func (t *table) lookup(name []byte) (rrs []byte, found bool) {
	s, nd := t.find(name, hashName(name))
	if nd == nil {
		return nil, false
	}
	start := nd.off + uint32(nd.nameLen)
	return s.data[start : start+nd.rrLen], true
}

func (t *table) find(name []byte, h uint64) (*shard, *node) {
	s := t.shards[t.shardOf(h)]
	if i, ok := s.index(name, h); ok {
		return s, &s.nodes[i]
	}
	return s, nil
}

// index finds name (whose hash is h) in the shard: its node's index.
func (s *shard) index(name []byte, h uint64) (uint32, bool) {
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		v := s.slots[i]
		if v == 0 {
			return 0, false
		}
		nd := &s.nodes[v-1]
		if int(nd.nameLen) == len(name) && bytes.Equal(s.data[nd.off:nd.off+uint32(nd.nameLen)], name) {
			return v - 1, true
		}
	}
}

func (s *shard) entry(nd *node) entry {
	start := nd.off + uint32(nd.nameLen)
	return entry{rrs: s.data[start : start+nd.rrLen], children: nd.children}
}

// each calls fn with every node of the table, in no particular order.
func (t *table) each(fn func(name, rrs []byte, children uint32)) {
	for _, s := range t.shards {
		for i := range s.nodes {
			nd := &s.nodes[i]
			start := nd.off + uint32(nd.nameLen)
			fn(s.data[nd.off:start], s.data[start:start+nd.rrLen], nd.children)
		}
	}
}

// update returns a table with the records of the given names replaced
// (nil or empty records: the name has none now). Empty non-terminals are
// created and removed so that every existing name's ancestors up to the
// apex exist. apex is the zone's wire name; names must be below it.
func (t *table) update(apex []byte, changes map[string][]byte) *table {
	pending := make(map[string]*entry, 2*len(changes)) // names and a few parents
	get := func(name string) *entry {
		if e, ok := pending[name]; ok {
			return e
		}
		e := &entry{}
		if t != nil {
			if s, nd := t.find([]byte(name), hashName([]byte(name))); nd != nil {
				*e = s.entry(nd)
			}
		}
		pending[name] = e
		return e
	}
	// adjust adds d to the child count of name's parent, and carries the
	// change upwards when the parent appears or disappears.
	var adjust func(name string, d int)
	adjust = func(name string, d int) {
		parent := name[int(name[0])+1:]
		if len(parent) <= len(apex) {
			return // the apex is not a node
		}
		p := get(parent)
		before := p.exists()
		p.children = uint32(int(p.children) + d)
		if after := p.exists(); after != before {
			adjust(parent, sign(after))
		}
	}
	// In any order: a name's existence changes once, and its parent's
	// count with it, whichever of two related names comes first.
	for name, rrs := range changes {
		e := get(name)
		before := e.exists()
		e.rrs = rrs
		if after := e.exists(); after != before {
			adjust(name, sign(after))
		}
	}

	// Rebuild the touched shards; a big change of size reshapes the table.
	size := 0
	if t != nil {
		size = t.names
	}
	for name, e := range pending {
		old := false
		if t != nil {
			_, nd := t.find([]byte(name), hashName([]byte(name)))
			old = nd != nil
		}
		switch {
		case e.exists() && !old:
			size++
		case !e.exists() && old:
			size--
		}
	}
	if t == nil || size > 4*len(t.shards)*nodesPerShard || size < len(t.shards)*nodesPerShard/4 {
		all := map[string]entry{}
		if t != nil {
			t.each(func(name, rrs []byte, children uint32) {
				all[string(name)] = entry{rrs: rrs, children: children}
			})
		}
		for name, e := range pending {
			if e.exists() {
				all[name] = *e
			} else {
				delete(all, name)
			}
		}
		return newTable(all)
	}
	return t.rebuildShards(pending, size)
}

// rebuildShards returns a table that is t with the names in pending
// replaced (or removed, when they no longer exist), rebuilding only the
// shards they fall in, on every core: a big commit touches most of them.
func (t *table) rebuildShards(pending map[string]*entry, size int) *table {
	nt := &table{shards: slices.Clone(t.shards), shift: t.shift, names: size}
	touched := map[int][]string{}
	for name := range pending {
		i := t.shardOf(hashName([]byte(name)))
		touched[i] = append(touched[i], name)
	}
	work := make(chan int, len(touched))
	for i := range touched {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(touched)) {
		wg.Go(func() {
			for i := range work {
				nt.shards[i] = t.shards[i].rebuilt(pending, touched[i])
			}
		})
	}
	wg.Wait()
	return nt
}

// batchPrefetch brings into the caches what the lookups of a batch of
// names will read first (each one's shard, slot, node, and name with its
// records), one stage at a time across the batch: a lookup's loads depend
// on each other, so one lookup waits for four cache misses in a row, but
// the misses of one stage for the whole batch overlap. Answering a batch
// of UDP queries after prefetching it took 15 % less CPU at 1M VMs (174k
// against 148k answers per CPU-second of cns's threads at 50k qps) and
// 4-6 % less at 10k and 100k (bench/cpu-per-answer.sh). It reads nothing
// it does not only prefetch; a name that turns out not to be there stops
// at the empty slot.
type batchPrefetch struct {
	n     int
	shard [udpBatch]*shard
	hash  [udpBatch]uint64
	node  [udpBatch]uint32 // slot value: node index + 1
	addrs [udpBatch]uintptr
}

// add queues the lookup of name in t (at most udpBatch names).
func (p *batchPrefetch) add(t *table, name []byte) {
	if p.n == len(p.shard) {
		return
	}
	h := hashName(name)
	p.shard[p.n], p.hash[p.n] = t.shards[t.shardOf(h)], h
	p.n++
}

// run prefetches the queued lookups, stage by stage.
func (p *batchPrefetch) run() {
	for i := range p.n {
		p.addrs[i] = uintptr(unsafe.Pointer(p.shard[i]))
	}
	prefetchLines(p.addrs[:p.n])
	for i := range p.n {
		s := p.shard[i]
		p.addrs[i] = uintptr(unsafe.Pointer(&s.slots[p.hash[i]&uint64(len(s.slots)-1)]))
	}
	prefetchLines(p.addrs[:p.n])
	k := 0
	for i := range p.n {
		s := p.shard[i]
		if v := s.slots[p.hash[i]&uint64(len(s.slots)-1)]; v != 0 {
			p.shard[k], p.node[k] = s, v
			p.addrs[k] = uintptr(unsafe.Pointer(&s.nodes[v-1]))
			k++
		}
	}
	prefetchLines(p.addrs[:k])
	for i := range k {
		s := p.shard[i]
		p.addrs[i] = uintptr(unsafe.Pointer(&s.data[s.nodes[p.node[i]-1].off]))
	}
	prefetchLines(p.addrs[:k])
}

// rrsOfType returns the run of records of type t inside rrs (which is
// sorted by type) and how many there are.
func rrsOfType(rrs []byte, t uint16) (run []byte, n int) {
	start, off := -1, 0
	for off+10 <= len(rrs) {
		rt := binary.BigEndian.Uint16(rrs[off:])
		if rt == t {
			if start < 0 {
				start = off
			}
			n++
		} else if start >= 0 || rt > t {
			break
		}
		off += 10 + int(binary.BigEndian.Uint16(rrs[off+8:]))
	}
	if start < 0 {
		return nil, 0
	}
	return rrs[start:off], n
}

// sign is +1 for a node that appeared, -1 for one that went.
func sign(appeared bool) int {
	if appeared {
		return 1
	}
	return -1
}
