package db

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Where a VM's entry is kept. Since schema 3 the VM entries (bucket vms)
// are keyed by when the VM was first stored, then by its UUID: a key is
// a sequence number (8 octets, big-endian) and the UUID (16 octets). The
// VM hash bucket (vmhash), keyed by the UUID's text, says where each
// entry is: its value is the updater's digest (8 octets), then the
// entry's sequence (8 octets).
//
// Why not the UUID alone: UUIDs are random, and a first load goes owner
// by owner (for the names: see feeds.Updater.dirtyOrder), so every chunk
// of it inserted VM entries all over the bucket and rewrote most of its
// pages, ~0.3 KB per VM at every chunk. Keyed by sequence, a commit's new
// VMs append to the bucket; a VM that changes keeps its key, so a steady
// commit writes the pages it wrote before. What is still scattered is
// the vmhash bucket, 16 octets a VM. bench/load.sh at 1M VMs: 7.5 GB
// written before, 5.4 GB after.
//
// Schema 2 and older keyed the entries by the UUID's text, and a vmhash
// value was the digest alone (schema 1 had no vmhash bucket). A read-only
// open of such a file reads it as it is (vmEntryKey, vmKeyID); a
// writable open moves its entries (migrate.go).

const (
	vmKeyLen       = 8 + 16
	vmHashValueLen = 8 + 8
)

// vmKey is the key of the entry of VM id first stored in sequence seq.
func vmKey(seq uint64, id [16]byte) []byte {
	k := make([]byte, 0, vmKeyLen)
	k = binary.BigEndian.AppendUint64(k, seq)
	return append(k, id[:]...)
}

// vmKeyID returns the UUID of an entry's key, of either layout.
func vmKeyID(k []byte) ([16]byte, error) {
	if len(k) == vmKeyLen {
		return [16]byte(k[8:]), nil
	}
	if len(k) == 36 {
		return parseUUID(string(k))
	}
	return [16]byte{}, fmt.Errorf("vm key %x is neither a sequence and a UUID nor a UUID", k)
}

// vmHashValue is a vmhash value: the digest, then the entry's sequence.
func vmHashValue(hash, seq uint64) []byte {
	v := make([]byte, 0, vmHashValueLen)
	v = binary.BigEndian.AppendUint64(v, hash)
	return binary.BigEndian.AppendUint64(v, seq)
}

// vmEntryKey returns the key of the entry of the VM whose UUID's text is
// uuid, from its vmhash value v: a value of schema 2 or older (the digest
// alone, or none) locates an entry keyed by the text.
func vmEntryKey(uuid []byte, id [16]byte, v []byte) []byte {
	if len(v) == vmHashValueLen {
		return vmKey(beU64(v[8:]), id)
	}
	return uuid
}

// vmEntryIn returns the stored entry of VM id, whose UUID's text is
// uuid, inside tx (nil: none), only valid during tx. A VM of a schema 3
// file without a vmhash entry is not stored, and no entry is keyed by a
// UUID's text there.
func vmEntryIn(tx *bolt.Tx, uuid []byte, id [16]byte) []byte {
	var v []byte
	if hb := tx.Bucket(bucketVMHashes); hb != nil {
		v = hb.Get(uuid)
	}
	return tx.Bucket(bucketVMs).Get(vmEntryKey(uuid, id, v))
}

// newVMSeq returns the sequence of the entries of the VMs this commit
// stores first: one after the last stored entry's, so that they append.
// It reads the bucket before the commit writes to it (keyedWrites holds
// the writes until flushVMs).
func (c *commit) newVMSeq() uint64 {
	if c.vmSeq == 0 {
		c.vmSeq = 1
		if k, _ := c.vms.b.Cursor().Last(); len(k) == vmKeyLen {
			c.vmSeq = beU64(k) + 1
		}
	}
	return c.vmSeq
}

// entryKey returns the key and sequence of VM id's entry: where it was
// stored first, or, when it is not stored, after the last stored entry.
// uuidKey is its UUID's text.
func (c *commit) entryKey(uuidKey []byte, id [16]byte) ([]byte, uint64) {
	seq := c.newVMSeq()
	if loc := c.hashes.get(uuidKey); len(loc) == vmHashValueLen {
		seq = beU64(loc[8:])
	}
	return vmKey(seq, id), seq
}
