package db

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Schema upgrades. Open upgrades a file of an older schema in place when
// it may write (a read-only open reads it as it is: every decoder still
// reads the older encodings and layouts).
//
// Schema 1 → 2: the VM entries move from encoding version 2 to 3 (see
// vmentry.go), about a third of the size; the meta of each passes through
// Options.UpgradeVMMeta. Schema 2 → 3: the VM entries are keyed by
// sequence and UUID rather than the UUID's text, and vmhash says where
// each is (vmkey.go); the entries of the older layout get sequence 0.
//
// The first transaction sets the schema to the current one, so a cns that
// reads only older schemas refuses the file from then on rather than meet
// an entry it cannot read, and marks the upgrade unfinished; the entries
// are rewritten upgradeChunk at a time (one transaction's memory stays
// small), and the last transaction clears the mark. An upgrade cut short
// resumes at the next open. The file does not shrink: the pages the old
// entries held are reused by later commits, and `cns db compact` gives
// them back.

// keyUpgrading, in the meta bucket, marks an upgrade begun and not
// finished.
var keyUpgrading = []byte("upgrading")

const upgradeChunk = 10000

// upgrade brings a file of schema from up to SchemaVersion.
func (d *DB) upgrade(from uint32) error {
	if from < SchemaVersion {
		err := d.update(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			if err := meta.Put(keyUpgrading, u32bytes(from)); err != nil {
				return err
			}
			return meta.Put(keySchema, u32bytes(SchemaVersion))
		})
		if err != nil {
			return err
		}
	}
	for {
		var done bool
		err := d.update(func(tx *bolt.Tx) error {
			var err error
			done, err = d.upgradeVMEntries(tx)
			if err != nil || !done {
				return err
			}
			return tx.Bucket(bucketMeta).Delete(keyUpgrading)
		})
		if err != nil || done {
			return err
		}
	}
}

// upgradeVMEntries moves up to upgradeChunk VM entries of the older
// layout (keyed by the UUID's text) to the current one, encoding them
// anew if older than version 3; done when none is left. The current
// layout's keys begin with a zero octet (a sequence below 2⁵⁶), a UUID's
// text with a hex digit, so the older ones come after every moved one.
func (d *DB) upgradeVMEntries(tx *bolt.Tx) (done bool, err error) {
	vms := tx.Bucket(bucketVMs)
	vms.FillPercent = fillPercent
	hashes, err := tx.CreateBucketIfNotExists(bucketVMHashes)
	if err != nil {
		return false, err
	}
	type move struct {
		uuid  []byte
		id    [16]byte
		value []byte
	}
	var batch []move
	c := vms.Cursor()
	k, v := c.Seek([]byte{1})
	for ; k != nil && len(batch) < upgradeChunk; k, v = c.Next() {
		id, err := parseUUID(string(k))
		if err != nil {
			return false, err
		}
		value := bytes.Clone(v)
		if len(v) > 0 && v[0] == vmEntryV2 {
			e, err := decodeVMEntryV2(v)
			if err != nil {
				return false, fmt.Errorf("vm %s: %w", k, err)
			}
			if d.opts.UpgradeVMMeta != nil {
				e.meta = d.opts.UpgradeVMMeta(e.meta)
			}
			value = e.encode(id)
		}
		batch = append(batch, move{bytes.Clone(k), id, value})
	}
	// bbolt cursors do not survive a Put: write once the walk is over.
	for _, m := range batch {
		var hash uint64 // none: a file of schema 1 (the updater recomputes)
		if hv := hashes.Get(m.uuid); len(hv) >= 8 {
			hash = beU64(hv)
		}
		if err := vms.Delete(m.uuid); err != nil {
			return false, err
		}
		if err := vms.Put(vmKey(0, m.id), m.value); err != nil {
			return false, err
		}
		if err := hashes.Put(m.uuid, vmHashValue(hash, 0)); err != nil {
			return false, err
		}
	}
	return k == nil, nil
}
