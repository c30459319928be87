package db

import (
	"bytes"
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Copies of the zones an aggregator follows (RFD 172) are kept so that a
// restart resumes each source with IXFR from the serial it stored. The
// aggregator owns the encoding; the store keeps the bytes, and writes
// them in the transaction of the change set whose region records they
// produced, so a copy and the region zone never disagree.
//
//	aggregate/<source>/state        the aggregator's state of the source
//	aggregate/<source>/names/<name> the source's records at one name
var bucketAggregate = []byte("aggregate")

var keySourceState = []byte("state")

// SourceUpdate changes the stored copy of one aggregated source zone.
type SourceUpdate struct {
	Source string // the aggregator's key of the source
	// Forget drops the source's copy (the other fields are ignored).
	Forget bool
	// Replace drops every stored name first (a full transfer).
	Replace bool
	// State replaces the source's state (nil: unchanged).
	State []byte
	// Names set (or, with a nil value, delete) the copy's names.
	Names map[string][]byte
}

// putSources applies updates inside a commit.
func putSources(tx *bolt.Tx, updates []SourceUpdate) error {
	if len(updates) == 0 {
		return nil
	}
	top, err := tx.CreateBucketIfNotExists(bucketAggregate)
	if err != nil {
		return err
	}
	for _, u := range updates {
		key := []byte(u.Source)
		if u.Forget || u.Replace {
			if top.Bucket(key) != nil {
				if err := top.DeleteBucket(key); err != nil {
					return err
				}
			}
			if u.Forget {
				continue
			}
		}
		src, err := top.CreateBucketIfNotExists(key)
		if err != nil {
			return err
		}
		if u.State != nil {
			if err := src.Put(keySourceState, u.State); err != nil {
				return err
			}
		}
		names, err := src.CreateBucketIfNotExists(bucketNames)
		if err != nil {
			return err
		}
		names.FillPercent = fillPercent
		// In key order: bbolt inserts into sorted pages, and random
		// order would move every page's entries over and over.
		for _, name := range slices.Sorted(maps.Keys(u.Names)) {
			v := u.Names[name]
			if v == nil {
				err = names.Delete([]byte(name))
			} else {
				err = names.Put([]byte(name), v)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// Sources returns the stored state of every aggregated source by key.
func (d *DB) Sources() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := d.view(func(tx *bolt.Tx) error {
		top := tx.Bucket(bucketAggregate)
		if top == nil {
			return nil
		}
		return top.ForEachBucket(func(k []byte) error {
			out[string(k)] = bytes.Clone(top.Bucket(k).Get(keySourceState))
			return nil
		})
	})
	return out, err
}

// ScanSource calls fn for every name of a source's stored copy, in key
// order. The value is only valid during the call.
func (d *DB) ScanSource(source string, fn func(name string, v []byte) error) error {
	return d.view(func(tx *bolt.Tx) error {
		top := tx.Bucket(bucketAggregate)
		if top == nil {
			return nil
		}
		src := top.Bucket([]byte(source))
		if src == nil {
			return nil
		}
		names := src.Bucket(bucketNames)
		if names == nil {
			return nil
		}
		return names.ForEach(func(k, v []byte) error { return fn(string(k), v) })
	})
}
