// Package db is cns's store: one bbolt file holding every zone's records,
// serial and journal, the per-VM contributions those records come from,
// and the state that must survive a restart. It is the only package that
// imports bbolt.
//
// Layout (schema version 2; migrate.go upgrades older files):
//
//	meta/schema               uint32 schema version
//	config/zones              ZoneConfig: the apex of every zone
//	zones/<zone>/meta         zoneMeta: serial, counters, served apex
//	zones/<zone>/names/<key>  candidates: each VM's records at that name
//	zones/<zone>/journal/<seq> JournalEntry, seq increasing
//	tombstones/<zone>         last serial of a zone that was removed
//	vms/<uuid>                the VM's opaque facts and the names it feeds
//	                          (vmentry.go)
//	aggregate/<source>/...    copies of aggregated zones (aggregate.go)
//
// One change set is one bbolt transaction: records, serials and journal
// entries land together or not at all.
package db

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/tritondatacenter/cns/db/durable"
)

// SchemaVersion is the layout this code reads and writes.
const SchemaVersion = 3

// oldestSchema is the oldest layout Open reads (read-only) and upgrades.
const oldestSchema = 1

// allocSize is the step in which the file grows (see Open).
const allocSize = 1 << 20

// DefaultMaxRRset keeps every RRset below BIND's max-records-per-type
// (100 since 9.18.28), with room to spare.
const DefaultMaxRRset = 90

var (
	// ErrLocked means another process (normally a running cns serve) holds
	// the file.
	ErrLocked = errors.New("db file is locked by another process (a running cns serve?); get a consistent copy with `cns adm backup` and inspect that")
	// ErrNotCNS means the file is a bbolt file without cns's layout.
	ErrNotCNS = errors.New("not a cns db (no schema version)")
	// ErrStopped is returned by Commit when the change set's Stop closed
	// before the transaction was written; nothing of it was stored.
	ErrStopped = errors.New("commit given up: stopping")
	// ErrReadOnly is returned by Commit on a db opened read-only.
	ErrReadOnly = errors.New("db is open read-only")
)

var (
	bucketMeta       = []byte("meta")
	bucketConfig     = []byte("config")
	bucketZones      = []byte("zones")
	bucketTombstones = []byte("tombstones")
	bucketVMs        = []byte("vms")
	keySchema        = []byte("schema")
	keyZoneConfig    = []byte("zones")
	keyZoneMeta      = []byte("meta")
	bucketNames      = []byte("names")
	bucketJournal    = []byte("journal")
)

// Options tune a DB. The zero value is usable.
type Options struct {
	// Journal bounds every zone's journal (default DefaultJournalLimits).
	Journal *JournalLimits
	// MaxRRset caps the records of one type at one name (default
	// DefaultMaxRRset; negative: no cap).
	MaxRRset int
	// Now is the clock serials and journal ages come from (default Now:
	// immune to steps of the system clock while cns runs).
	Now func() time.Time
	// ReadOnly opens the file without write access and without blocking a
	// writer's lock for longer than LockTimeout.
	ReadOnly bool
	// LockTimeout is how long Open waits for another process's lock
	// (default 1 s read-write, 100 ms read-only).
	LockTimeout time.Duration
	// NoSync skips fsync on commit: only for tests and benchmarks.
	NoSync bool
	// UpgradeVMMeta, when set, rewrites each VM's opaque meta while Open
	// upgrades a file of an older schema (migrate.go); nil keeps it as
	// stored.
	UpgradeVMMeta func(meta []byte) []byte
}

// DB is an open store.
type DB struct {
	// file is the open bbolt file. CompactLive replaces it while the
	// server runs: a read that began on the old one finishes there, and
	// writers wait for commitMu.
	file    atomic.Pointer[bolt.DB]
	path    string
	opts    Options
	journal JournalLimits
	policy  publishPolicy
	now     func() time.Time

	// schema is the file's layout version: SchemaVersion, or an older
	// one when the file was opened read-only.
	schema uint32

	mu      sync.Mutex
	hooks   []func(*Committed)
	backlog *Backlog
	// commitMu orders commits and their hooks; every other write, and a
	// live compaction, takes it too. The hooks run under it, so a hook
	// must not write to the store (it would wait for itself).
	commitMu sync.Mutex
}

// Open opens or creates the store at path. A new file gets the current
// schema; an existing file must carry it. Open never rewrites a file it
// cannot read.
func Open(path string, opts Options) (*DB, error) {
	timeout := opts.LockTimeout
	if timeout == 0 {
		timeout = time.Second
		if opts.ReadOnly {
			timeout = 100 * time.Millisecond
		}
	}
	_, statErr := os.Stat(path)
	if opts.ReadOnly && statErr != nil {
		return nil, fmt.Errorf("open db %s: %w", path, statErr)
	}
	created := errors.Is(statErr, fs.ErrNotExist)
	bdb, err := openBolt(path, boltOptions(opts, timeout))
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("open db %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("open db %s: %w", path, err)
	}
	// bbolt grows a file past 16 MiB in 16 MiB steps (AllocSize), so up to
	// 16 MiB of it are not even free pages. Growing it in 1 MiB steps
	// costs at most one more ftruncate and fsync in a commit that grows
	// it, and such a commit fsyncs anyway.
	bdb.AllocSize = allocSize
	d := &DB{path: path, opts: opts, now: opts.Now, backlog: newBacklog()}
	d.file.Store(bdb)
	if d.now == nil {
		d.now = Now
	}
	d.journal = DefaultJournalLimits
	if opts.Journal != nil {
		d.journal = *opts.Journal
	}
	d.policy.maxRRset = DefaultMaxRRset
	if opts.MaxRRset > 0 {
		d.policy.maxRRset = opts.MaxRRset
	} else if opts.MaxRRset < 0 {
		d.policy.maxRRset = 0
	}
	if err := d.checkSchema(); err != nil {
		bdb.Close()
		return nil, fmt.Errorf("open db %s: %w", path, err)
	}
	if created {
		// bbolt syncs the file's pages, not the directory that names
		// it: without this, a power cut can take the new file back,
		// and every commit in it (TestPowerCut).
		if err := durable.SyncDir(filepath.Dir(path)); err != nil {
			bdb.Close()
			return nil, fmt.Errorf("open db %s: %w", path, err)
		}
	}
	return d, nil
}

// boltOptions are how Open (and CompactLive, for the file it makes)
// opens a bbolt file.
func boltOptions(opts Options, timeout time.Duration) *bolt.Options {
	bo := &bolt.Options{Timeout: timeout, ReadOnly: opts.ReadOnly, NoSync: opts.NoSync, FreelistType: bolt.FreelistMapType}
	if !opts.ReadOnly && strconv.IntSize == 64 {
		// Address space, not memory: a growing file (a first load) is not
		// mapped again at every doubling, which copies every page a
		// commit has touched out of the old mapping (100k VMs: 0.65 GB
		// of garbage) and waits for the readers.
		bo.InitialMmapSize = 1 << 30
	}
	return bo
}

// openBolt opens the file, turning the panics bbolt raises on some corrupt
// files into errors.
func openBolt(path string, o *bolt.Options) (b *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("corrupt file: %v", r)
		}
	}()
	return bolt.Open(path, 0o600, o)
}

// checkSchema creates the layout in an empty file and verifies it in any
// other. It never modifies a file that already holds data.
func (d *DB) checkSchema() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt file: %v", r)
		}
	}()
	empty := true
	err = d.view(func(tx *bolt.Tx) error {
		return tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
	})
	if err != nil {
		return err
	}
	if empty {
		if d.opts.ReadOnly {
			return ErrNotCNS
		}
		return d.update(func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			for _, b := range [][]byte{bucketConfig, bucketZones, bucketTombstones, bucketVMs} {
				if _, err := tx.CreateBucket(b); err != nil {
					return err
				}
			}
			if err := meta.Put(keyUnverified, []byte("created empty")); err != nil {
				return err
			}
			d.schema = SchemaVersion
			return meta.Put(keySchema, u32bytes(SchemaVersion))
		})
	}
	var stored uint32
	var upgrading bool
	err = d.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return ErrNotCNS
		}
		v := meta.Get(keySchema)
		if len(v) != 4 {
			return ErrNotCNS
		}
		stored = beU32(v)
		if stored < oldestSchema || stored > SchemaVersion {
			return fmt.Errorf("schema version %d, this cns reads versions %d to %d", stored, oldestSchema, SchemaVersion)
		}
		upgrading = meta.Get(keyUpgrading) != nil
		for _, b := range [][]byte{bucketConfig, bucketZones, bucketTombstones, bucketVMs} {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("schema version %d but bucket %q is missing", stored, b)
			}
		}
		return nil
	})
	d.schema = stored
	if err != nil || d.opts.ReadOnly || (stored == SchemaVersion && !upgrading) {
		return err
	}
	if err := d.upgrade(stored); err != nil {
		return fmt.Errorf("upgrade from schema version %d: %w", stored, err)
	}
	d.schema = SchemaVersion
	return nil
}

// Schema returns the file's layout version.
func (d *DB) Schema() int { return int(d.schema) }

// Close closes the file.
// Close closes the file, after a commit or a compaction under way.
func (d *DB) Close() error {
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	return d.file.Load().Close()
}

// Path returns the file's path.
func (d *DB) Path() string { return d.path }

// OnCommit registers fn to run after every successful Commit, in commit
// order, before Commit returns. fn must not call Commit.
func (d *DB) OnCommit(fn func(*Committed)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hooks = append(d.hooks, fn)
}

func u32bytes(v uint32) []byte {
	return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

func beU32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
