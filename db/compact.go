package db

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/tritondatacenter/cns/db/durable"
)

// Compaction. A bbolt file never shrinks: pages freed by deleted records
// and trimmed journals go on its freelist and are reused by later
// commits, so a db under steady churn stops growing once the freelist
// covers a commit's needs (RELIABILITY.md has the figures). What it does
// not do is give back space after the data center itself shrank (many
// VMs destroyed, a zone removed, journal limits lowered). Compact
// rewrites the live data into a new file; run it offline, after such a
// shrink, when `cns db info` shows a file much bigger than its contents.

// CompactResult is what Compact did.
type CompactResult struct {
	Before, After int64 // file sizes in bytes
}

// Compact rewrites the db at path into a fresh file holding only live
// pages, checks the copy (Check: journals, counters, no orphans) and
// renames it over path. It refuses a file a running server holds.
func Compact(path string) (CompactResult, error) {
	var res CompactResult
	fi, err := os.Stat(path)
	if err != nil {
		return res, err
	}
	res.Before = fi.Size()
	// The source stays open, and locked, until the copy has replaced it.
	src, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 100 * time.Millisecond, ReadOnly: false})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return res, fmt.Errorf("compact %s: %w", path, ErrLocked)
	}
	if err != nil {
		return res, fmt.Errorf("compact %s: %w", path, err)
	}
	defer src.Close()
	tmp, err := compactCopy(src, path, false)
	defer os.Remove(tmp)
	if err != nil {
		return res, err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return res, err
	}
	chk, err := Open(tmp, Options{ReadOnly: true})
	if err != nil {
		return res, fmt.Errorf("compacted copy: %w", err)
	}
	probs, err := chk.Check()
	chk.Close()
	if err == nil && len(probs) > 0 {
		err = fmt.Errorf("%d problems, first: %s", len(probs), probs[0])
	}
	if err != nil {
		return res, fmt.Errorf("compacted copy fails the check, %s left as it was: %w", path, err)
	}
	if fi, err := os.Stat(tmp); err == nil {
		res.After = fi.Size()
	}
	return res, durable.Rename(tmp, path)
}

// Live compaction. A data center's first load leaves a third of the
// file free: each chunk of it rewrites the pages of the name buckets
// (their keys follow owners, addresses and services, not the order VMs
// come in), and the pages the last chunks freed are never needed again
// by a steady data center. CompactIfSparse, called once a large backlog
// is committed, gives that space back while the server runs.

// sparseFraction and sparseMin are when a file is worth compacting
// live: free pages at least an eighth of it, and at least 16 MiB. After
// a first load the free pages are a third of the file at 100k VMs and a
// sixth at 1M, and the pages in use only 60-67 % full, which the copy
// fills: 100k VMs 2,389 → 1,385 bytes a VM, 1M 1,839 → ~1,070.
const sparseFraction = 8

var sparseMin = testBytes("CNS_TEST_SPARSE_MIN", 16<<20)

// testBytes is the number of bytes in the environment variable name, or
// def: the whole-program power-cut test (secondaries_powercut_test.go) lowers
// sparseMin with CNS_TEST_SPARSE_MIN so that a load it can afford in CI
// is compacted live. Not documented for operators.
func testBytes(name string, def int64) int64 {
	if n, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil && n > 0 {
		return n
	}
	return def
}

// CompactIfSparse compacts the file live (CompactLive) when its free
// pages are a large part of it. ok reports whether it did.
func (d *DB) CompactIfSparse() (res CompactResult, ok bool, err error) {
	if d.opts.ReadOnly {
		return res, false, nil
	}
	st := d.file.Load().Stats()
	size, err := fileSize(d.path)
	if err != nil {
		return res, false, err
	}
	free := int64(st.FreeAlloc)
	if free < sparseMin || free*sparseFraction < size {
		return res, false, nil
	}
	res, err = d.CompactLive()
	return res, err == nil, err
}

// CompactLive rewrites the file without its free pages while it is in
// use, and puts the copy in its place. Writers (commits and the other
// saves) wait meanwhile; readers go on in the old file, and a read that
// begins after the swap reads the new one (view). The copy is made
// beside the file, so the file system needs room for the live data.
func (d *DB) CompactLive() (CompactResult, error) {
	var res CompactResult
	if d.opts.ReadOnly {
		return res, ErrReadOnly
	}
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	old := d.file.Load()
	var err error
	if res.Before, err = fileSize(d.path); err != nil {
		return res, err
	}
	tmp, err := compactCopy(old, d.path, d.opts.NoSync)
	defer os.Remove(tmp) // after a failure; renamed away on success
	if err != nil {
		return res, err
	}
	// Opened before the rename: the lock that keeps a second process out
	// is on the new file from the moment path names it.
	nb, err := openBolt(tmp, boltOptions(d.opts, time.Second))
	if err != nil {
		return res, fmt.Errorf("compacted copy: %w", err)
	}
	nb.AllocSize = allocSize
	if err := durable.Rename(tmp, d.path); err != nil {
		nb.Close()
		return res, fmt.Errorf("compact %s: %w", d.path, err)
	}
	d.file.Store(nb)
	// Waits for the reads still in the old file; its pages go with it.
	if err := old.Close(); err != nil {
		return res, fmt.Errorf("close the file compacted: %w", err)
	}
	res.After, err = fileSize(d.path)
	return res, err
}

// compactCopy writes src's live data, in full pages, into a new file
// beside path and returns its name ("" when none was made). The caller
// removes it unless it renames it over path.
func compactCopy(src *bolt.DB, path string, noSync bool) (string, error) {
	tmpf, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".compact.*")
	if err != nil {
		return "", err
	}
	tmp := tmpf.Name()
	tmpf.Close()
	// Synced once, at the end (copyLive): the copy is nothing until it is
	// renamed over path.
	o := &bolt.Options{FreelistType: bolt.FreelistMapType, NoSync: true}
	if size, err := fileSize(path); err == nil && size >= 64<<20 && strconv.IntSize == 64 {
		// The copy is no bigger than the file: mapped once at that size,
		// it is not mapped again at every doubling, each of which copies
		// every node of the copy's open transaction out of the old
		// mapping (100k VMs: 1.35 GB of garbage, two thirds of the
		// copy's CPU time). Not for a small file: bbolt grows a file
		// mapped at no more than its AllocSize to the whole mapping.
		o.InitialMmapSize = int(size)
	}
	dst, err := bolt.Open(tmp, 0o600, o)
	if err != nil {
		return tmp, err
	}
	dst.AllocSize = allocSize
	err = copyLive(dst, src, compactTxBytes)
	if err == nil && !noSync {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return tmp, fmt.Errorf("compact %s: %w", path, err)
	}
	return tmp, nil
}

func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// compactTxBytes is how many bytes of keys and values one transaction of
// a compaction's copy takes. A transaction holds them twice until it
// commits (bbolt's nodes, then the pages they are written to): in
// transactions of 64 MiB, as bbolt's own Compact was called, the
// compaction that ends a 100k-VM first load added ~140 MiB to the
// process, more than the load's chunks by then. The copy is synced once,
// at its end, so smaller transactions cost no more syncs.
const compactTxBytes = 16 << 20

// copyLive writes every bucket (with its sequence), key and value of src
// into dst, in key order, pages filled, in transactions of txBytes
// (bolt.Compact's copy). The pages of src it has read are released every
// scanReleaseEvery bytes, as forEachReleasing does: read whole, a 100k-VM
// file left ~190 MiB of it resident by the copy's end. src's mapping
// cannot move meanwhile (its read transaction stays open).
func copyLive(dst, src *bolt.DB, txBytes int) error {
	tx, err := dst.Begin(true)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // the last one, when the copy failed
	size, read := 0, 0
	// dstBucket is the bucket at path in the current transaction.
	dstBucket := func(path [][]byte) *bolt.Bucket {
		b := tx.Bucket(path[0])
		for _, k := range path[1:] {
			b = b.Bucket(k)
		}
		return b
	}
	err = src.View(func(stx *bolt.Tx) error {
		release := func() { releaseMapping(stx.DB().Info().Data, uintptr(stx.Size())) }
		defer release()
		var copyBucket func(path [][]byte, from *bolt.Bucket) error
		copyBucket = func(path [][]byte, from *bolt.Bucket) error {
			return from.ForEach(func(k, v []byte) error {
				n := len(k) + len(v)
				if size += n; size > txBytes {
					if err := tx.Commit(); err != nil {
						return err
					}
					if tx, err = dst.Begin(true); err != nil {
						return err
					}
					size = n
				}
				if read += n; read >= scanReleaseEvery {
					read = 0
					release()
				}
				to := dstBucket(path)
				to.FillPercent = 1.0
				if v != nil {
					return to.Put(k, v)
				}
				nested := from.Bucket(k)
				b, err := to.CreateBucket(k)
				if err == nil {
					err = b.SetSequence(nested.Sequence())
				}
				if err != nil {
					return err
				}
				return copyBucket(append(path[:len(path):len(path)], k), nested)
			})
		}
		return stx.ForEach(func(name []byte, from *bolt.Bucket) error {
			b, err := tx.CreateBucket(name)
			if err == nil {
				err = b.SetSequence(from.Sequence())
			}
			if err != nil {
				return err
			}
			return copyBucket([][]byte{name}, from)
		})
	})
	if err != nil {
		return err
	}
	return tx.Commit()
}
