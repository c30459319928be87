package db

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// The self-removal hysteresis state of every service (members, pending
// removals and their clocks, the window's budget, recent decisions) is
// encoded by the updater, which owns it; the store keeps one record per
// service, written by Commit in the transaction of the change set whose
// records the decisions produced, so the two never disagree.
//
//	hysteresis/<owner uuid>/<service>  opaque state
var bucketHysteresis = []byte("hysteresis")

// Hysteresis returns every stored service's hysteresis state by key.
func (d *DB) Hysteresis() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := d.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketHysteresis)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			out[string(k)] = bytes.Clone(v)
			return nil
		})
	})
	return out, err
}

// putHysteresis writes states inside a commit; a nil state deletes.
func putHysteresis(tx *bolt.Tx, states map[string][]byte) error {
	if len(states) == 0 {
		return nil
	}
	b, err := tx.CreateBucketIfNotExists(bucketHysteresis)
	if err != nil {
		return err
	}
	for k, v := range states {
		if v == nil {
			err = b.Delete([]byte(k))
		} else {
			err = b.Put([]byte(k), v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
