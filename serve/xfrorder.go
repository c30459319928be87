package serve

import (
	"cmp"
	"slices"
)

// nodeRef is one node of a table, by shard and index.
type nodeRef struct {
	key   uint64
	shard uint32
	node  uint32
}

// transferOrder lists the table's nodes grouped by the two labels right
// below the apex (all of an owner's instances and services, all of the
// CMON names), so a transfer message holds names that share long
// suffixes and its name compression finds them. The table itself is in
// hash order, which scatters an owner's names over every message.
func (t *table) transferOrder(apexLen int) []nodeRef {
	refs := make([]nodeRef, 0, t.names)
	for si, s := range t.shards {
		for ni := range s.nodes {
			nd := &s.nodes[ni]
			name := s.data[nd.off : nd.off+uint32(nd.nameLen)]
			refs = append(refs, nodeRef{key: subtreeKey(name, apexLen), shard: uint32(si), node: uint32(ni)})
		}
	}
	slices.SortFunc(refs, func(a, b nodeRef) int { return cmp.Compare(a.key, b.key) })
	return refs
}

// subtreeKey is a hash of the label right below the apex in its high
// half and of the one below that in its low half (0 where there is none).
func subtreeKey(name []byte, apexLen int) uint64 {
	end := len(name) - apexLen
	last, prev := -1, -1
	for i := 0; i < end; i += int(name[i]) + 1 {
		prev, last = last, i
	}
	var key uint64
	if last >= 0 {
		key = labelHash(0, name[last:end]) &^ (1<<32 - 1)
	}
	if prev >= 0 {
		key |= labelHash(0, name[prev:last]) >> 32
	}
	return key
}

// eachInTransferOrder calls fn with every node in transferOrder.
func (t *table) eachInTransferOrder(apexLen int, fn func(name, rrs []byte)) {
	for _, r := range t.transferOrder(apexLen) {
		s := t.shards[r.shard]
		nd := &s.nodes[r.node]
		start := nd.off + uint32(nd.nameLen)
		fn(s.data[nd.off:start], s.data[start:start+nd.rrLen])
	}
}
