package db

import (
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketLastSeen keeps, per VM, when a feed last reported it (Unix
// milliseconds): the updater's coarse record of GET /vm/:uuid's
// last_visit, so a restart knows it roughly. It is written apart from
// change sets (SaveLastSeen), a small value per VM, because a VM seen
// unchanged changes nothing else; a VM's removal deletes its entry.
var bucketLastSeen = []byte("vmseen")

// SaveLastSeen stores when the VMs named were last seen (Unix ms), in one
// transaction. VMs the store does not hold are skipped: one removed
// meanwhile leaves nothing behind.
func (d *DB) SaveLastSeen(seen map[string]int64) error {
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	if len(seen) == 0 {
		return nil
	}
	return d.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketLastSeen)
		if err != nil {
			return err
		}
		b.FillPercent = fillPercent
		stored := tx.Bucket(bucketVMHashes) // every stored VM has an entry there
		if stored == nil {
			return nil
		}
		// In key order: bbolt appends in order cheaply, where random
		// order splits pages all over the tree.
		type entry struct {
			key string
			ms  int64
		}
		entries := make([]entry, 0, len(seen))
		for uuid, ms := range seen {
			if id, err := parseUUID(uuid); err == nil {
				entries = append(entries, entry{formatUUID(id), ms})
			}
		}
		slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
		for _, e := range entries {
			key := []byte(e.key)
			if stored.Get(key) == nil {
				continue
			}
			if err := b.Put(key, u64key(uint64(e.ms))); err != nil {
				return err
			}
		}
		return nil
	})
}

// lastSeen reads a VM's stored last-seen time inside tx (zero when none).
func lastSeen(tx *bolt.Tx, key []byte) time.Time {
	b := tx.Bucket(bucketLastSeen)
	if b == nil {
		return time.Time{}
	}
	if v := b.Get(key); len(v) == 8 {
		return time.UnixMilli(int64(beU64(v)))
	}
	return time.Time{}
}

// deleteLastSeen forgets a removed VM's last-seen time inside tx.
func deleteLastSeen(tx *bolt.Tx, key []byte) error {
	if b := tx.Bucket(bucketLastSeen); b != nil {
		return b.Delete(key)
	}
	return nil
}
