package db

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// State that other packages own and encode (peer state, propagation
// tracking, per-service hysteresis) is kept in its own bucket as opaque
// values by key, so a restart resumes it. The store only reads and writes
// the bytes.
//
//	peers/<address>               serving side's peer record
//	propagation/<zone>            serving side's propagation record
//	hysteresis/<owner>/<service>  updater's hysteresis state
//	guard/state                   updater's removal guard state
var (
	// Peers and propagation are written by the serving side, outside
	// the updater's change sets: the only other writers of the file.
	bucketPeers       = []byte("peers")
	bucketPropagation = []byte("propagation")
	// Hysteresis state is written by Commit in the transaction of the
	// change set whose records its decisions produced, so the two never
	// disagree.
	bucketHysteresis = []byte("hysteresis")
	// The removal guard's state likewise, in the transaction of the
	// change set whose removals it held or let through.
	bucketGuard = []byte("guard")
)

// guardKey is the one key of bucketGuard.
const guardKey = "state"

// Guard returns the stored removal guard state (nil when none).
func (d *DB) Guard() ([]byte, error) {
	m, err := d.readOpaque(bucketGuard, false)
	return m[guardKey], err
}

// putGuard writes the removal guard state inside a commit (nil: as it is).
func putGuard(tx *bolt.Tx, state []byte) error {
	if state == nil {
		return nil
	}
	return putOpaque(tx, bucketGuard, map[string][]byte{guardKey: state})
}

// Peers returns every stored peer record by address.
func (d *DB) Peers() (map[string][]byte, error) { return d.readOpaque(bucketPeers, false) }

// SavePeers writes peer records; a nil record deletes the peer.
func (d *DB) SavePeers(peers map[string][]byte) error {
	return d.saveOpaque(bucketPeers, peers)
}

// Propagation returns the stored propagation records by zone.
func (d *DB) Propagation() (map[string][]byte, error) {
	return d.readOpaque(bucketPropagation, false)
}

// SavePropagation writes propagation records by zone; nil deletes.
func (d *DB) SavePropagation(zones map[string][]byte) error {
	return d.saveOpaque(bucketPropagation, zones)
}

// Hysteresis returns every stored service's hysteresis state by key.
func (d *DB) Hysteresis() (map[string][]byte, error) {
	return d.readOpaque(bucketHysteresis, true)
}

// putHysteresis writes states inside a commit; a nil state deletes.
func putHysteresis(tx *bolt.Tx, states map[string][]byte) error {
	return putOpaque(tx, bucketHysteresis, states)
}

// readOpaque reads a bucket; big ones release the pages they read.
func (d *DB) readOpaque(bucket []byte, big bool) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := d.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		forEach := b.ForEach
		if big {
			forEach = func(fn func(k, v []byte) error) error { return d.forEachReleasing(tx, b, fn) }
		}
		return forEach(func(k, v []byte) error {
			out[string(k)] = bytes.Clone(v)
			return nil
		})
	})
	return out, err
}

func (d *DB) saveOpaque(bucket []byte, values map[string][]byte) error {
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	return d.update(func(tx *bolt.Tx) error { return putOpaque(tx, bucket, values) })
}

// putOpaque writes values into bucket inside tx; a nil value deletes.
func putOpaque(tx *bolt.Tx, bucket []byte, values map[string][]byte) error {
	if len(values) == 0 {
		return nil
	}
	b, err := tx.CreateBucketIfNotExists(bucket)
	if err != nil {
		return err
	}
	for k, v := range values {
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
