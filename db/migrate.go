package db

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// Schema upgrades. Open upgrades a file of an older schema in place when
// it may write (a read-only open reads it as it is: every decoder still
// reads the older encodings).
//
// Schema 1 → 2: the VM entries move from encoding version 2 to 3 (see
// vmentry.go), about a third of the size; the meta of each passes through
// Options.UpgradeVMMeta. The first transaction sets the schema to 2, so
// a cns that reads only schema 1 refuses the file from then on rather
// than meet an entry it cannot read, and marks the upgrade unfinished;
// the entries are rewritten upgradeChunk at a time (one transaction's
// memory stays small), and the last transaction clears the mark. An
// upgrade cut short resumes at the next open. The file does not shrink:
// the pages the old entries held are reused by later commits, and
// `cns db compact` gives them back.

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
	var after []byte
	for {
		var done bool
		err := d.update(func(tx *bolt.Tx) error {
			var err error
			after, done, err = d.upgradeVMEntries(tx, after)
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

// upgradeVMEntries rewrites up to upgradeChunk VM entries of an older
// encoding, from the first key after after; done when none is left.
func (d *DB) upgradeVMEntries(tx *bolt.Tx, after []byte) (last []byte, done bool, err error) {
	vms := tx.Bucket(bucketVMs)
	vms.FillPercent = fillPercent
	type rewrite struct{ key, value []byte }
	var batch []rewrite
	c := vms.Cursor()
	k, v := c.First()
	if after != nil {
		if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
			k, v = c.Next()
		}
	}
	for ; k != nil && len(batch) < upgradeChunk; k, v = c.Next() {
		last = bytes.Clone(k)
		if len(v) == 0 || v[0] != vmEntryV2 {
			continue
		}
		id, err := parseUUID(string(k))
		if err != nil {
			return nil, false, err
		}
		e, err := decodeVMEntryV2(v)
		if err != nil {
			return nil, false, err
		}
		if d.opts.UpgradeVMMeta != nil {
			e.meta = d.opts.UpgradeVMMeta(e.meta)
		}
		batch = append(batch, rewrite{last, e.encode(id)})
	}
	// bbolt cursors do not survive a Put: write once the walk is over.
	for _, r := range batch {
		if err := vms.Put(r.key, r.value); err != nil {
			return nil, false, err
		}
	}
	return last, k == nil, nil
}
