package serve

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// The order an AXFR sends a table's names in. The table keeps its names in
// hash order, which scatters an owner's ~150 names (instances, aliases,
// services: <vm>.inst.<owner>.<zone>) over the whole transfer, so each
// message writes the 37-byte owner label again. Sent grouped by the label
// directly below the apex (then by the second, inst or svc), an owner's
// names share messages and the label is written once per message: at 100k
// VMs 34.4 → 28.13 MB, NSD's size within 0.002 % (NSD sends in canonical
// order, cns by the first 8 bytes of the name within a group).
//
// Grouping costs a pass over the table, so it is done once per table by the
// first transfer that needs it and kept with the table: a table is never
// changed, and a commit that leaves a zone's names alone keeps its table.

// xfrOrder lists a table's nodes, each as its shard index shifted left by
// nodeBits plus its index in the shard, grouped by groupKey (groups in
// byte order of their key, nodes by their first bytes within a group): 4 bytes
// a name, 1 MB at 100k VMs.
type xfrOrder struct {
	nodes    []uint32
	nodeBits uint
}

// orderItem is a node on its way into an xfrOrder.
type orderItem struct {
	head uint64 // the name's first 8 bytes
	ref  uint32
}

// xfrOrderCache holds a table's transfer order once built.
type xfrOrderCache struct {
	once  sync.Once
	order *xfrOrder // nil when the table cannot be indexed in 32 bits
}

// transferOrder returns the table's transfer order, building it on first
// use. apex is the zone's wire name.
func (t *table) transferOrder(apex []byte) *xfrOrder {
	t.xfr.once.Do(func() { t.xfr.order = buildXFROrder(t, len(apex)) })
	return t.xfr.order
}

// buildXFROrder groups t's nodes by groupKey (the apex is apexLen bytes
// long) with a counting sort: one pass gives every node its group, a
// second places it. It returns nil if a node reference does not fit 32 bits.
func buildXFROrder(t *table, apexLen int) *xfrOrder {
	shardBits := uint(bits.Len(uint(len(t.shards) - 1)))
	nodeBits := 32 - shardBits
	total := 0
	for _, s := range t.shards {
		if len(s.nodes) > 1<<nodeBits {
			return nil
		}
		total += len(s.nodes)
	}
	groupIDs := map[string]uint32{}
	var labels []string
	var key []byte
	groupOf := make([]uint32, total)
	k := 0
	for _, s := range t.shards {
		for i := range s.nodes {
			nd := &s.nodes[i]
			key = groupKey(key[:0], s.data[nd.off:nd.off+uint32(nd.nameLen)], apexLen)
			id, ok := groupIDs[string(key)]
			if !ok {
				id = uint32(len(labels))
				groupIDs[string(key)] = id
				labels = append(labels, string(key))
			}
			groupOf[k] = id
			k++
		}
	}
	// Groups in label order, so that a transfer's order does not depend
	// on the hash seed; start[g] is where group g's nodes begin.
	byLabel := make([]uint32, len(labels))
	for id := range byLabel {
		byLabel[id] = uint32(id)
	}
	slices.SortFunc(byLabel, func(a, b uint32) int { return strings.Compare(labels[a], labels[b]) })
	rank := make([]uint32, len(labels))
	for r, id := range byLabel {
		rank[id] = uint32(r)
	}
	start := make([]uint32, len(labels)+1)
	for _, id := range groupOf {
		start[rank[id]+1]++
	}
	for g := 1; g < len(start); g++ {
		start[g] += start[g-1]
	}
	// Within a group, by the name's first 8 bytes (the leaf label, nearly
	// always unique), so that the transfer is the same whatever the hash
	// seed, message boundaries included.
	placed := make([]orderItem, total)
	k = 0
	for si, s := range t.shards {
		for i := range s.nodes {
			nd := &s.nodes[i]
			var head [8]byte
			copy(head[:], s.data[nd.off:nd.off+uint32(nd.nameLen)])
			g := rank[groupOf[k]]
			placed[start[g]] = orderItem{binary.BigEndian.Uint64(head[:]), uint32(si)<<nodeBits | uint32(i)}
			start[g]++
			k++
		}
	}
	from := uint32(0)
	var scratch []orderItem
	for _, end := range start[:len(labels)] { // now where each group ends
		sortByHead(placed[from:end], &scratch)
		from = end
	}
	o := &xfrOrder{nodes: make([]uint32, total), nodeBits: nodeBits}
	for i, it := range placed {
		o.nodes[i] = it.ref
	}
	return o
}

// sortByHead sorts items by head: a quicksort with the comparison inline,
// insertion sort for short runs (most groups are a few dozen names), where
// slices.SortFunc calls its comparison through a function value (15
// million times at 1M VMs). A large group is sorted by radix (radixByHead),
// in linear time whatever its names: a quicksort is not safe there from
// names chosen to defeat its pivots (aliases are the users'). scratch is
// grown to the largest such group and reused.
func sortByHead(a []orderItem, scratch *[]orderItem) {
	if len(a) > 256 {
		if cap(*scratch) < len(a) {
			*scratch = make([]orderItem, len(a))
		}
		radixByHead(a, (*scratch)[:len(a)])
		return
	}
	for len(a) > 16 {
		// The median of the first, middle and last heads goes first, as
		// the pivot.
		m, l := len(a)/2, len(a)-1
		if a[m].head < a[0].head {
			a[m], a[0] = a[0], a[m]
		}
		if a[l].head < a[m].head {
			a[l], a[m] = a[m], a[l]
			if a[m].head < a[0].head {
				a[m], a[0] = a[0], a[m]
			}
		}
		a[0], a[m] = a[m], a[0]
		pivot := a[0].head
		i, j := 1, l
		for {
			for i <= j && a[i].head < pivot {
				i++
			}
			for i <= j && a[j].head > pivot {
				j--
			}
			if i >= j {
				break
			}
			a[i], a[j] = a[j], a[i]
			i++
			j--
		}
		a[0], a[j] = a[j], a[0]
		// Recurse into the smaller side, loop on the larger.
		if j < len(a)-1-j {
			sortByHead(a[:j], scratch)
			a = a[j+1:]
		} else {
			sortByHead(a[j+1:], scratch)
			a = a[:j]
		}
	}
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j].head < a[j-1].head; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// radixByHead sorts a by head, a byte at a time from the last (a stable
// LSD radix sort through tmp, as long as a), skipping the bytes all heads
// share.
func radixByHead(a, tmp []orderItem) {
	src, dst := a, tmp
	for shift := uint(0); shift < 64; shift += 8 {
		var count [256]int
		for _, it := range src {
			count[byte(it.head>>shift)]++
		}
		if count[byte(src[0].head>>shift)] == len(src) {
			continue
		}
		sum := 0
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for _, it := range src {
			b := byte(it.head >> shift)
			dst[count[b]] = it
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &a[0] {
		copy(a, src)
	}
}

// groupKey appends to dst the key name's group sorts by: the label
// directly below the apex (an absolute wire name apexLen bytes long),
// followed, when the name lies deeper than two labels below the apex, by
// the second label (inst, svc), with their length bytes. Such a key starts
// with its first label's key, so the names below one label stay together.
// A malformed name is its own key.
func groupKey(dst, name []byte, apexLen int) []byte {
	end := len(name) - apexLen
	first, second := -1, -1 // the labels before the current one
	for i := 0; i < end; {
		next := i + int(name[i]) + 1
		if next == end {
			dst = append(dst, name[i:end]...)
			if first >= 0 {
				dst = append(dst, name[second:i]...)
			}
			return dst
		}
		if name[i] == 0 || next > end {
			break
		}
		first, second = second, i
		i = next
	}
	return append(dst, name...)
}

// eachInTransferOrder calls fn with every node of t in the order o.
//
// The nodes lie all over the table's memory (shards are chosen by hash),
// so nearly every node is a cache miss, and the encoding between two
// nodes is too long for the processor to reach the next node's loads
// while it waits for this one's. So the walk prefetches: a batch of nodes
// is encoded while the names and records of the next batch, the nodes of
// the one after and the shards of the third are on their way into the
// caches (prefetchLines): each stage reads what the one before fetched.
func (t *table) eachInTransferOrder(o *xfrOrder, fn func(name, rrs []byte)) {
	const batch = 16
	mask := uint32(1)<<o.nodeBits - 1
	refs := func(b int) []uint32 { return o.nodes[min(b, len(o.nodes)):min(b+batch, len(o.nodes))] }
	var addrs [batch * 8]uintptr
	shardLines := func(a []uintptr, refs []uint32) []uintptr {
		for _, ref := range refs {
			s := uintptr(unsafe.Pointer(t.shards[ref>>o.nodeBits]))
			a = append(a, s+unsafe.Offsetof(shard{}.nodes), s+unsafe.Offsetof(shard{}.data)+unsafe.Sizeof([]byte(nil))-1)
		}
		return a
	}
	nodeLines := func(a []uintptr, refs []uint32) []uintptr {
		for _, ref := range refs {
			s := t.shards[ref>>o.nodeBits]
			a = append(a, uintptr(unsafe.Pointer(&s.nodes[ref&mask])))
		}
		return a
	}
	dataLines := func(a []uintptr, refs []uint32) []uintptr {
		for _, ref := range refs {
			s := t.shards[ref>>o.nodeBits]
			nd := &s.nodes[ref&mask]
			base := uintptr(unsafe.Pointer(unsafe.SliceData(s.data)))
			last := base + uintptr(nd.off+uint32(nd.nameLen)+nd.rrLen) - 1
			for l := (base + uintptr(nd.off)) &^ 63; l <= last && len(a) < cap(a); l += 64 {
				a = append(a, l)
			}
		}
		return a
	}
	prefetchLines(shardLines(shardLines(addrs[:0], refs(batch)), refs(2*batch)))
	prefetchLines(nodeLines(nodeLines(addrs[:0], refs(0)), refs(batch)))
	prefetchLines(dataLines(addrs[:0], refs(0)))
	for b := 0; b < len(o.nodes); b += batch {
		a := shardLines(addrs[:0], refs(b+3*batch))
		prefetchLines(dataLines(nodeLines(a, refs(b+2*batch)), refs(b+batch)))
		for _, ref := range refs(b) {
			s := t.shards[ref>>o.nodeBits]
			nd := &s.nodes[ref&mask]
			start := nd.off + uint32(nd.nameLen)
			fn(s.data[nd.off:start], s.data[start:start+nd.rrLen])
		}
	}
}
