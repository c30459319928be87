package db

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// Peer state (what each secondary has, counters, NOTIFY bookkeeping) is
// recorded by the serving side, which owns its encoding; the store keeps
// it so a restart neither forgets peers nor resets their counters. It is
// the one thing besides the updater's change sets that writes the file,
// in its own bucket.
var bucketPeers = []byte("peers")

// Peers returns every stored peer record by address.
func (d *DB) Peers() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := d.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPeers)
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

// SavePeers writes peer records; a nil record deletes the peer.
func (d *DB) SavePeers(peers map[string][]byte) error {
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	return d.bolt.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketPeers)
		if err != nil {
			return err
		}
		for k, v := range peers {
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
	})
}

// Propagation tracking (which secondary serves which serial) is kept like
// peer state, by the serving side, in its own bucket.
var bucketPropagation = []byte("propagation")

// Propagation returns the stored propagation records by zone.
func (d *DB) Propagation() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := d.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPropagation)
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

// SavePropagation writes propagation records by zone; nil deletes.
func (d *DB) SavePropagation(zones map[string][]byte) error {
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	return d.bolt.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketPropagation)
		if err != nil {
			return err
		}
		for k, v := range zones {
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
	})
}
