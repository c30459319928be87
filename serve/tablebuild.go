package serve

import (
	"bytes"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
)

// tableBuilder lays out a zone's table from its names in store order (a
// name before its descendants, and its descendants right after it:
// db.ScanZone's order). The empty non-terminals and child counts come
// from the chain of ancestors of the last name, so a warm-up holds no
// index of every name and no second copy of the zone (issue 21: peak
// memory while restarting).
//
// The names and records are logged, in the order they come, in large
// blocks per group of shards; finish then lays out each group's shards
// at their exact size and drops the group's blocks. Shards grown by
// append instead leave their outgrown storage scattered among the live
// shards, and the heap's spans stay a sixth larger than the table after
// the collector has freed it.
type tableBuilder struct {
	apex   []byte
	t      *table
	groups []logGroup
	gshift uint // shard index >> gshift selects the group
	// stack is the chain of nodes above and at the last name added,
	// the one nearest the apex first.
	stack []nodeRef
	nodes int
}

// logGroup holds the nodes of a range of shards, in the order they came.
type logGroup struct {
	nodes [][]logNode // blocks of logBlockNodes
	data  [][]byte    // blocks of at least logBlockBytes
	count int
}

// logNode is a node while it is logged: data[block][off:] holds its name
// and records.
type logNode struct {
	node
	shard, block uint32
}

// The blocks are large objects: the collector returns each whole.
const (
	logBlockNodes = 2048
	logBlockBytes = 64 << 10
	logGroups     = 64
)

type nodeRef struct {
	group, node uint32
}

// newTableBuilder starts a table for a zone (apex wire name) expected to
// hold about size names. The estimate only sets the number of shards: a
// wrong one gives a table that works, and that update reshapes.
func newTableBuilder(apex []byte, size int) *tableBuilder {
	t := emptyTable(size)
	nshards := len(t.shards)
	ngroups := min(nshards, logGroups)
	return &tableBuilder{apex: apex, t: t, groups: make([]logGroup, ngroups), gshift: uint(bits.Len(uint(nshards/ngroups)) - 1)}
}

// add adds name (absolute, lower-case wire, strictly below the apex) with
// its records, creating the empty non-terminals between it and its
// nearest ancestor that is a node. Names must come in store order.
func (b *tableBuilder) add(name, rrs []byte) error {
	for len(b.stack) > 0 {
		top := b.name(b.stack[len(b.stack)-1])
		if len(top) < len(name) && bytes.HasSuffix(name, top) && labelStart(name, len(name)-len(top)) {
			break
		}
		if bytes.Equal(top, name) {
			return fmt.Errorf("name %x added twice (not in store order)", name)
		}
		b.stack = b.stack[:len(b.stack)-1]
	}
	// The ancestors between the nearest node (or the apex) and name are
	// empty non-terminals, created from the top down.
	have := len(b.apex)
	if len(b.stack) > 0 {
		have = len(b.name(b.stack[len(b.stack)-1]))
	}
	var startsBuf [128]int
	starts := startsBuf[:0]
	for i := 0; len(name)-i > have; i += int(name[i]) + 1 {
		starts = append(starts, i)
	}
	for j := len(starts) - 1; j > 0; j-- {
		b.push(name[starts[j]:], nil)
	}
	b.push(name, rrs)
	return nil
}

// labelStart reports whether a label of name starts at offset off.
func labelStart(name []byte, off int) bool {
	i := 0
	for i < off {
		i += int(name[i]) + 1
	}
	return i == off
}

// push logs a node for name below the stack's top, counts it there and
// makes it the top.
func (b *tableBuilder) push(name, rrs []byte) {
	if len(b.stack) > 0 {
		b.node(b.stack[len(b.stack)-1]).children++
	}
	shard := b.t.shardOf(hashName(name))
	gi := shard >> b.gshift
	g := &b.groups[gi]
	need := len(name) + len(rrs)
	if len(g.data) == 0 || len(g.data[len(g.data)-1])+need > cap(g.data[len(g.data)-1]) {
		g.data = append(g.data, make([]byte, 0, max(logBlockBytes, need)))
	}
	blk := len(g.data) - 1
	d := &g.data[blk]
	if g.count%logBlockNodes == 0 {
		g.nodes = append(g.nodes, make([]logNode, 0, logBlockNodes))
	}
	nb := &g.nodes[len(g.nodes)-1]
	*nb = append(*nb, logNode{node: node{off: uint32(len(*d)), nameLen: uint8(len(name)), rrLen: uint32(len(rrs))}, shard: uint32(shard), block: uint32(blk)})
	*d = append(*d, name...)
	*d = append(*d, rrs...)
	b.stack = append(b.stack, nodeRef{uint32(gi), uint32(g.count)})
	g.count++
	b.nodes++
}

func (b *tableBuilder) node(r nodeRef) *logNode {
	return &b.groups[r.group].nodes[r.node/logBlockNodes][r.node%logBlockNodes]
}

func (b *tableBuilder) name(r nodeRef) []byte {
	n := b.node(r)
	return b.groups[r.group].data[n.block][n.off : n.off+uint32(n.nameLen)]
}

// finish lays out the shards, a group at a time on every core, and
// returns the table. The builder is not used again.
func (b *tableBuilder) finish() *table {
	t := b.t
	t.names = b.nodes
	b.stack = nil
	workers := min(runtime.GOMAXPROCS(0), len(b.groups))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(b.groups); i += workers {
				b.layOut(i)
				b.groups[i] = logGroup{}
			}
		})
	}
	wg.Wait()
	return t
}

// layOut builds the shards of group gi at their exact size, each node in
// the order it was logged.
func (b *tableBuilder) layOut(gi int) {
	g := &b.groups[gi]
	first := gi << b.gshift
	shards := b.t.shards[first : first+1<<b.gshift]
	sizes := make([][2]int, len(shards)) // nodes, bytes
	for _, blk := range g.nodes {
		for i := range blk {
			sz := &sizes[int(blk[i].shard)-first]
			sz[0]++
			sz[1] += int(blk[i].nameLen) + int(blk[i].rrLen)
		}
	}
	for i, sz := range sizes {
		shards[i] = &shard{nodes: make([]node, 0, sz[0]), data: make([]byte, 0, sz[1])}
	}
	for _, blk := range g.nodes {
		for i := range blk {
			n := &blk[i]
			s := shards[int(n.shard)-first]
			nd := n.node
			nd.off = uint32(len(s.data))
			s.data = append(s.data, g.data[n.block][n.off:n.off+uint32(n.nameLen)+n.rrLen]...)
			s.nodes = append(s.nodes, nd)
		}
	}
	for _, s := range shards {
		indexShard(s)
	}
}

// indexShard builds a laid-out shard's slot array.
func indexShard(s *shard) {
	nslots := 4
	for nslots < 2*len(s.nodes) {
		nslots <<= 1
	}
	s.slots = make([]uint32, nslots)
	mask := uint64(nslots - 1)
	for j := range s.nodes {
		nd := &s.nodes[j]
		for i := hashName(s.data[nd.off:nd.off+uint32(nd.nameLen)]) & mask; ; i = (i + 1) & mask {
			if s.slots[i] == 0 {
				s.slots[i] = uint32(j + 1)
				break
			}
		}
	}
}
