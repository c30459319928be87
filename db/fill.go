package db

import (
	"bytes"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Page fill. When a commit makes a page outgrow its size, bbolt splits it
// into pages filled to the bucket's FillPercent and one with the rest.
// Where a commit only appends (every key it writes sorts after the
// bucket's last one, as an initial load writes its VMs in UUID order),
// full pages waste nothing: the next append starts a new page. Where it
// writes among existing keys, pages split at fillPercent keep room for
// the next inserts, so that a page takes a few before it splits again.
//
// fills holds, per bucket a commit writes, whether it has only appended
// so far; FillPercent is read when the commit writes its pages, so the
// last put decides.
type fills map[*bolt.Bucket]*fill

type fill struct {
	last   []byte // the greatest key: before the commit, or appended since
	random bool   // some put was not an append
}

// of returns b's state, reading its last key the first time: before the
// commit deletes anything in b (see del).
func (f fills) of(b *bolt.Bucket) *fill {
	s := f[b]
	if s == nil {
		s = &fill{}
		s.last, _ = b.Cursor().Last()
		f[b] = s
	}
	return s
}

// del deletes key from b. A commit deletes through fills so that b's
// last key is read before anything is deleted: bbolt's Cursor.Last
// (v1.5.0) never returns on a bucket of several pages whose keys this
// transaction deleted every one of (it steps back and forth over the
// empty leaves), which a commit that moves every name of a bucket
// (a renumbered network's reverse zone) would reach at its first put.
func (f fills) del(b *bolt.Bucket, key []byte) error {
	f.of(b)
	return b.Delete(key)
}

// put writes key in b and sets b's FillPercent for this commit. As for
// bbolt's Put, key must stay unchanged until the commit ends.
func (f fills) put(b *bolt.Bucket, key, value []byte) error {
	s := f.of(b)
	if !s.random {
		if s.last == nil || bytes.Compare(key, s.last) > 0 {
			s.last = key
			b.FillPercent = 1
		} else {
			s.random = true
			b.FillPercent = fillPercent
		}
	}
	return b.Put(key, value)
}

// keyedWrites holds a commit's writes to one bucket keyed by VM UUID
// until the commit's VMs are applied, then writes them in key order
// (flush). The VMs of a change set come in owner order (a backlog's
// chunks), so written as they come they would be inserts all over the
// bucket, and within one transaction bbolt keeps a node's entries in one
// slice until it commits: into an empty bucket (a first load) every
// insert shifted the entries after it, quadratic in the chunk (20k VMs
// under -race: a 2 s commit took 5.5 s). In key order they append.
type keyedWrites struct {
	b  *bolt.Bucket
	at map[string]int // key → its write in ws
	ws []keyedWrite
}

type keyedWrite struct {
	key, value []byte // value nil: delete
}

func newKeyedWrites(b *bolt.Bucket) *keyedWrites {
	return &keyedWrites{b: b, at: map[string]int{}}
}

// get returns key's value as this commit has left it so far.
func (w *keyedWrites) get(key []byte) []byte {
	if i, ok := w.at[string(key)]; ok {
		return w.ws[i].value
	}
	return w.b.Get(key)
}

// put sets key to value (nil deletes it) when the commit flushes. As for
// bbolt's Put, key and value must stay unchanged until the commit ends.
func (w *keyedWrites) put(key, value []byte) {
	if i, ok := w.at[string(key)]; ok {
		w.ws[i].value = value
		return
	}
	w.at[string(key)] = len(w.ws)
	w.ws = append(w.ws, keyedWrite{key, value})
}

// flush writes every held write, in key order, through f.
func (w *keyedWrites) flush(f fills) error {
	slices.SortFunc(w.ws, func(a, b keyedWrite) int { return bytes.Compare(a.key, b.key) })
	for _, x := range w.ws {
		var err error
		if x.value == nil {
			err = f.del(w.b, x.key)
		} else {
			err = f.put(w.b, x.key, x.value)
		}
		if err != nil {
			return err
		}
	}
	w.ws, w.at = nil, nil
	return nil
}

// flushVMs writes the VM entries and digests applyVM held, in key order.
func (c *commit) flushVMs() error {
	if c.vms == nil {
		return nil
	}
	if err := c.vms.flush(c.fills); err != nil {
		return err
	}
	return c.hashes.flush(c.fills)
}
