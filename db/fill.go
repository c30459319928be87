package db

import (
	"bytes"

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
