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

// put writes key in b and sets b's FillPercent for this commit. As for
// bbolt's Put, key must stay unchanged until the commit ends.
func (f fills) put(b *bolt.Bucket, key, value []byte) error {
	s := f[b]
	if s == nil {
		s = &fill{}
		s.last, _ = b.Cursor().Last()
		f[b] = s
	}
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
