package db

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/miekg/dns"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// view runs fn in a read transaction and turns a panic from a corrupt
// page into an error, so a damaged file fails one read, not the process.
func (d *DB) view(fn func(tx *bolt.Tx) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("db %s: corrupt data: %v", d.path, r)
		}
	}()
	for {
		f := d.file.Load()
		err = f.View(fn)
		// A live compaction closed f after this read loaded it: read
		// the new file.
		if errors.Is(err, bolterrors.ErrDatabaseNotOpen) && d.file.Load() != f {
			continue
		}
		return err
	}
}

// update runs fn in a write transaction, in turn with the commits.
func (d *DB) update(fn func(tx *bolt.Tx) error) error {
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	return d.file.Load().Update(fn)
}

// ZoneConfig returns the stored zone configuration.
func (d *DB) ZoneConfig() (ZoneConfig, error) {
	var c ZoneConfig
	err := d.view(func(tx *bolt.Tx) error {
		var err error
		c, err = readZoneConfig(tx)
		return err
	})
	return c, err
}

// Zones describes every stored zone, ordered by name.
func (d *DB) Zones() ([]ZoneInfo, error) {
	var out []ZoneInfo
	err := d.view(func(tx *bolt.Tx) error {
		zones := tx.Bucket(bucketZones)
		return zones.ForEachBucket(func(k []byte) error {
			zi, err := zoneInfo(zones.Bucket(k), string(k))
			if err != nil {
				return err
			}
			out = append(out, zi)
			return nil
		})
	})
	return out, err
}

// Zone describes one zone; ok is false when it is not stored.
func (d *DB) Zone(name string) (zi ZoneInfo, ok bool, err error) {
	err = d.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketZones).Bucket([]byte(name))
		if b == nil {
			return nil
		}
		ok = true
		zi, err = zoneInfo(b, name)
		return err
	})
	return zi, ok, err
}

func zoneInfo(b *bolt.Bucket, name string) (ZoneInfo, error) {
	m, err := decodeZoneMeta(b.Get(keyZoneMeta))
	if err != nil {
		return ZoneInfo{}, fmt.Errorf("zone %s: %w", name, err)
	}
	zi := ZoneInfo{
		Name: name, Reverse: isReverseZone(name), Serial: m.Serial, LastChange: m.LastChange,
		Names: int(m.Names), Records: int(m.Records), Apex: m.Apex,
		JournalEntries: int(m.JEntries), JournalBytes: int64(m.JBytes),
	}
	if k, v := b.Bucket(bucketJournal).Cursor().First(); k != nil {
		if from, _, _, ok := journalHeader(v); ok {
			zi.JournalFrom = from
		}
	}
	return zi, nil
}

// ScanZone calls fn with every owner name of zone that has records, in
// store order (a name before its descendants, and those right after it:
// the keys are the labels from the apex down), and what it publishes.
// owner and rrs are only valid during the call. The apex is not included.
func (d *DB) ScanZone(zone string, fn func(owner []byte, rrs RRs) error) error {
	sc, err := d.newZoneScan(zone)
	if err != nil {
		return err
	}
	return d.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketZones).Bucket([]byte(zone))
		if b == nil {
			return fmt.Errorf("zone %s is not stored", zone)
		}
		return d.forEachReleasing(tx, b.Bucket(bucketNames), func(k, v []byte) error {
			_, err := sc.visit(k, v, fn)
			return err
		})
	})
}

// ScanZoneChunk is ScanZone for a reader that must not hold a read
// transaction for long (a transfer, which writes at its client's pace):
// in one transaction, it calls fn with the names after the key after (nil:
// from the first) until about limit bytes of records have gone to fn. It
// returns the key to go on from (nil once the zone is done) and the zone's
// serial as stored in that transaction: a commit between two chunks
// changes it, and the caller decides what names from two serials mean.
func (d *DB) ScanZoneChunk(zone string, after []byte, limit int, fn func(owner []byte, rrs RRs) error) (next []byte, serial uint32, err error) {
	sc, err := d.newZoneScan(zone)
	if err != nil {
		return nil, 0, err
	}
	err = d.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketZones).Bucket([]byte(zone))
		if b == nil {
			return fmt.Errorf("zone %s is not stored", zone)
		}
		m, err := decodeZoneMeta(b.Get(keyZoneMeta))
		if err != nil {
			return fmt.Errorf("zone %s: %w", zone, err)
		}
		serial = m.Serial
		c := b.Bucket(bucketNames).Cursor()
		k, v := c.First()
		if after != nil {
			if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		// A chunk's pages are released as a whole scan's are
		// (forEachReleasing): a transfer reads the whole zone.
		defer releaseMapping(tx.DB().Info().Data, uintptr(tx.Size()))
		var last []byte // the last key read, valid in tx only
		for sent := 0; k != nil; k, v = c.Next() {
			if sent >= limit {
				next = bytes.Clone(last)
				return nil
			}
			n, err := sc.visit(k, v, fn)
			if err != nil {
				return err
			}
			sent += n
			last = k
		}
		return nil
	})
	return next, serial, err
}

// zoneScan decodes a zone's stored names into what they publish, with one
// set of buffers for a whole scan: a 100k-VM zone has 700k names, and a
// warm-up should not leave millions of small objects for the collector.
type zoneScan struct {
	d       *DB
	zone    string
	wire    []byte
	cands   []candidate
	scratch publishScratch
	owner   []byte
}

func (d *DB) newZoneScan(zone string) (*zoneScan, error) {
	wire, err := ZoneWire(zone)
	if err != nil {
		return nil, err
	}
	return &zoneScan{d: d, zone: zone, wire: wire}, nil
}

// visit calls fn with the name stored at key k (value v) and what it
// publishes, unless it publishes nothing; n is the bytes of records.
func (sc *zoneScan) visit(k, v []byte, fn func(owner []byte, rrs RRs) error) (n int, err error) {
	if sc.cands, err = appendCandidates(sc.cands[:0], v); err != nil {
		return 0, fmt.Errorf("zone %s name %s: %w", sc.zone, WireToString(keyToWire(k, sc.wire)), err)
	}
	rrs, _ := sc.d.policy.publishWith(&sc.scratch, sc.cands)
	if len(rrs) == 0 {
		return 0, nil
	}
	sc.owner = appendKeyWire(sc.owner[:0], k, sc.wire)
	return len(sc.owner) + len(rrs), fn(sc.owner, rrs)
}

// Lookup returns what zone publishes at owner (an absolute, lower-case
// wire name strictly below the zone apex) and whether names exist below
// it, which makes an owner without records an empty non-terminal.
func (d *DB) Lookup(zone string, zoneWire, owner []byte) (rrs RRs, below bool, err error) {
	key, ok := relativeKey(owner, zoneWire)
	if !ok {
		return nil, false, fmt.Errorf("%s is not below zone %s", WireToString(owner), zone)
	}
	err = d.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketZones).Bucket([]byte(zone))
		if b == nil {
			return nil
		}
		c := b.Bucket(bucketNames).Cursor()
		k, v := c.Seek(key)
		if k != nil && bytes.Equal(k, key) {
			cands, err := decodeCandidates(v)
			if err != nil {
				return err
			}
			rrs, _ = d.policy.publish(cands)
			rrs = bytes.Clone(rrs)
			k, _ = c.Next()
		}
		below = k != nil && len(k) > len(key) && bytes.HasPrefix(k, key)
		return nil
	})
	return rrs, below, err
}

// Journal returns the entries that take zone from serial from to its
// current serial, oldest first. ok is false when the journal does not
// reach back to from (or from is unknown): the caller sends the whole zone.
func (d *DB) Journal(zone string, from uint32) (entries []JournalEntry, ok bool, err error) {
	wire, err := ZoneWire(zone)
	if err != nil {
		return nil, false, err
	}
	err = d.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketZones).Bucket([]byte(zone))
		if b == nil {
			return nil
		}
		c := b.Bucket(bucketJournal).Cursor()
		found := false
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if !found {
				f, _, _, hok := journalHeader(v)
				if !hok || f != from {
					continue
				}
				found = true
			}
			e, err := decodeJournalEntry(v, wire)
			if err != nil {
				return fmt.Errorf("zone %s: %w", zone, err)
			}
			entries = append(entries, e)
		}
		ok = found
		return nil
	})
	return entries, ok, err
}

// History returns up to limit journal entries of zone whose To serial is
// after since (RFC 1982), newest last. limit <= 0 means all.
func (d *DB) History(zone string, since uint32, limit int) ([]JournalEntry, error) {
	wire, err := ZoneWire(zone)
	if err != nil {
		return nil, err
	}
	var out []JournalEntry
	err = d.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketZones).Bucket([]byte(zone))
		if b == nil {
			return fmt.Errorf("zone %s is not stored", zone)
		}
		c := b.Bucket(bucketJournal).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			_, to, _, ok := journalHeader(v)
			if !ok {
				return fmt.Errorf("zone %s: journal entry %x is corrupt", zone, k)
			}
			if since != 0 && !SerialLess(since, to) {
				break
			}
			e, err := decodeJournalEntry(v, wire)
			if err != nil {
				return fmt.Errorf("zone %s: %w", zone, err)
			}
			out = append(out, e)
			if limit > 0 && len(out) >= limit {
				break
			}
		}
		return nil
	})
	slices.Reverse(out)
	return out, err
}

// VMRecord is one name a VM contributes to and the records it gives it.
type VMRecord struct {
	Zone  string
	Owner string // presentation, fully qualified
	RRs   []dns.RR
}

// VM is what the store holds about one VM.
type VM struct {
	UUID    string
	Meta    []byte
	Records []VMRecord
	// LastSeen is when a feed last reported the VM, as last saved
	// (SaveLastSeen); zero when never saved.
	LastSeen time.Time
	// Client is how the VM is recognised when it asks cns (nil: it is not).
	Client *Client
}

// VM returns the stored VM; ok is false when the store does not know it.
func (d *DB) VM(uuid string) (vm VM, ok bool, err error) {
	id, err := parseUUID(uuid)
	if err != nil {
		return VM{}, false, err
	}
	vm.UUID = formatUUID(id)
	err = d.view(func(tx *bolt.Tx) error {
		raw := vmEntryIn(tx, []byte(vm.UUID), id)
		if raw == nil {
			return nil
		}
		ok = true
		vm.LastSeen = lastSeen(tx, []byte(vm.UUID))
		e, err := decodeVMEntry(id, raw)
		if err != nil {
			return fmt.Errorf("vm %s: %w", uuid, err)
		}
		vm.Meta = bytes.Clone(e.meta)
		if cb := tx.Bucket(bucketClients); cb != nil {
			if raw := cb.Get([]byte(vm.UUID)); raw != nil {
				c, err := decodeClient(raw)
				if err != nil {
					return fmt.Errorf("vm %s client: %w", uuid, err)
				}
				vm.Client = &c
			}
		}
		for _, n := range e.names {
			b := tx.Bucket(bucketZones).Bucket([]byte(n.zone))
			if b == nil {
				continue
			}
			wire, err := ZoneWire(n.zone)
			if err != nil {
				return err
			}
			cands, err := decodeCandidates(b.Bucket(bucketNames).Get(n.key))
			if err != nil {
				return err
			}
			owner := WireToString(keyToWire(n.key, wire))
			rec := VMRecord{Zone: n.zone, Owner: owner}
			for _, c := range cands {
				if c.vm != id {
					continue
				}
				rr, err := DecodeRR(keyToWire(n.key, wire), c.rr)
				if err != nil {
					return err
				}
				rec.RRs = append(rec.RRs, rr)
			}
			vm.Records = append(vm.Records, rec)
		}
		return nil
	})
	return vm, ok, err
}

// Name is an owner name in a zone: the zone lower case without the
// trailing dot, the owner a presentation name.
type Name struct{ Zone, Owner string }

// VMsAt calls fn with the index of each of names and each VM whose
// records are at it, VM by VM, in one read: which VMs occupy the names
// another is to take. A name the store does not hold has none.
func (d *DB) VMsAt(names []Name, fn func(i int, vm string)) error {
	return d.view(func(tx *bolt.Tx) error {
		zones := tx.Bucket(bucketZones)
		wires := map[string][]byte{}
		for i, n := range names {
			b := zones.Bucket([]byte(n.Zone))
			if b == nil {
				continue
			}
			zw, ok := wires[n.Zone]
			if !ok {
				var err error
				if zw, err = ZoneWire(n.Zone); err != nil {
					return err
				}
				wires[n.Zone] = zw
			}
			owner, err := wireName(n.Owner)
			if err != nil {
				return err
			}
			key, below := relativeKey(owner, zw)
			if !below {
				continue
			}
			cands, err := decodeCandidates(b.Bucket(bucketNames).Get(key))
			if err != nil {
				return fmt.Errorf("name %s: %w", n.Owner, err)
			}
			for j, c := range cands { // (sorted by VM: sortCandidates)
				if j == 0 || c.vm != cands[j-1].vm {
					fn(i, formatUUID(c.vm))
				}
			}
		}
		return nil
	})
}

// EachVM calls fn with the UUID and meta of every stored VM, in the order
// they were first stored (vmkey.go). meta is only valid during the call.
func (d *DB) EachVM(fn func(uuid string, meta []byte) error) error {
	return d.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketVMs).ForEach(func(k, v []byte) error {
			id, err := vmKeyID(k)
			if err != nil {
				return err
			}
			uuid := formatUUID(id)
			e, err := decodeVMEntry(id, v)
			if err != nil {
				return fmt.Errorf("vm %s: %w", uuid, err)
			}
			return fn(uuid, e.meta)
		})
	})
}

// VMMetas calls fn with the meta of each VM of uuids the store holds,
// all read in one transaction; a VM it does not hold, or a malformed
// UUID, is skipped. meta is only valid during the call. When uuids are a
// good part of the stored VMs, one pass over every entry costs less than
// a lookup each (BenchmarkVMMetas), and fn sees them in the store's order
// rather than theirs.
func (d *DB) VMMetas(uuids []string, fn func(uuid string, meta []byte) error) error {
	return d.view(func(tx *bolt.Tx) error {
		// A lookup costs about as much as passing over 16 entries
		// (BenchmarkVMMetas); Stats walks the bucket's pages, not its
		// entries (~0.15 ms at 50k VMs).
		if 16*len(uuids) >= tx.Bucket(bucketVMs).Stats().KeyN {
			return scanVMMetas(tx, uuids, fn)
		}
		return lookUpVMMetas(tx, uuids, fn)
	})
}

// lookUpVMMetas is VMMetas by one lookup per VM. uuids in order walk the
// store's UUID index in order.
func lookUpVMMetas(tx *bolt.Tx, uuids []string, fn func(uuid string, meta []byte) error) error {
	for _, uuid := range uuids {
		id, err := parseUUID(uuid)
		if err != nil {
			continue
		}
		key := []byte(formatUUID(id))
		raw := vmEntryIn(tx, key, id)
		if raw == nil {
			continue
		}
		meta, err := vmEntryMeta(raw)
		if err != nil {
			return fmt.Errorf("vm %s: %w", uuid, err)
		}
		if err := fn(string(key), meta); err != nil {
			return err
		}
	}
	return nil
}

// scanVMMetas is VMMetas in one pass over the VM entries.
func scanVMMetas(tx *bolt.Tx, uuids []string, fn func(uuid string, meta []byte) error) error {
	want := make(map[[16]byte]struct{}, len(uuids))
	for _, uuid := range uuids {
		if id, err := parseUUID(uuid); err == nil {
			want[id] = struct{}{}
		}
	}
	return tx.Bucket(bucketVMs).ForEach(func(k, v []byte) error {
		id, err := vmKeyID(k)
		if err != nil {
			return err
		}
		if _, ok := want[id]; !ok {
			return nil
		}
		meta, err := vmEntryMeta(v)
		if err != nil {
			return fmt.Errorf("vm %s: %w", formatUUID(id), err)
		}
		return fn(formatUUID(id), meta)
	})
}

// Backup writes a consistent copy of the whole file to w and returns its
// size. Commits wait for it no longer than it takes bbolt to copy pages.
func (d *DB) Backup(w io.Writer) (int64, error) {
	var n int64
	err := d.view(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// bucketVMHashes keeps, per VM, the updater's digest of its last change
// and where its entry is (vmkey.go).
var bucketVMHashes = []byte("vmhash")

// VMHashes returns every stored VM's hash by UUID (0 for a VM stored
// without one). It reads a small bucket, not the VM entries, so a
// restart learns which VMs exist without touching most of the file.
func (d *DB) VMHashes() (map[string]uint64, error) {
	out := map[string]uint64{}
	err := d.view(func(tx *bolt.Tx) error {
		hb := tx.Bucket(bucketVMHashes)
		if hb != nil {
			d.forEachReleasing(tx, hb, func(k, v []byte) error {
				if len(v) >= 8 { // the digest, then (schema 3) where the entry is
					out[string(k)] = beU64(v)
				}
				return nil
			})
		}
		// VMs stored without a hash (an older file) still exist.
		if vb := tx.Bucket(bucketVMs); vb != nil && hb == nil {
			return vb.ForEach(func(k, _ []byte) error {
				out[string(k)] = 0
				return nil
			})
		}
		return nil
	})
	return out, err
}

func beU64(b []byte) uint64 {
	return uint64(beU32(b[:4]))<<32 | uint64(beU32(b[4:]))
}
