package db

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/miekg/dns"
	bolt "go.etcd.io/bbolt"
)

// fillPercent is where pages split when a commit inserts among existing
// keys (fill.go; bbolt's default is 0.5). Names and VMs rarely grow once
// written, so pages can be fuller than that; too full, and the next
// random inserts split them again into a full page and a nearly empty one.
const fillPercent = 0.7

// Commit applies cs in one transaction and, once it is durable, tells the
// OnCommit hooks. Records that cannot be stored (outside their zone, in no
// configured zone, unencodable) are skipped and reported, never fatal.
func (d *DB) Commit(cs *ChangeSet) (*Committed, error) {
	if d.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	// Commits from different goroutines (the updater, the serial check)
	// reach the hooks in the order they landed.
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	var out *Committed
	err := d.file.Load().Update(func(tx *bolt.Tx) error {
		c, err := newCommit(tx, d, cs.Cause)
		if err != nil {
			return err
		}
		if cs.Zones != nil {
			if err := c.setZoneConfig(cs.Zones); err != nil {
				return err
			}
		}
		for i := range cs.VMs {
			if i%256 == 0 && stopped(cs.Stop) {
				return ErrStopped
			}
			if err := c.applyVM(&cs.VMs[i]); err != nil {
				return err
			}
		}
		if err := c.flushVMs(); err != nil {
			return err
		}
		if err := putHysteresis(tx, cs.Hysteresis); err != nil {
			return err
		}
		if err := putGuard(tx, cs.Guard); err != nil {
			return err
		}
		if err := putSources(tx, cs.Sources); err != nil {
			return err
		}
		if err := c.raiseSerials(cs.SerialFloors); err != nil {
			return err
		}
		if out, err = c.finish(); err != nil {
			return err
		}
		if stopped(cs.Stop) {
			return ErrStopped // the last moment before bbolt writes
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	hooks := slices.Clone(d.hooks)
	d.mu.Unlock()
	for _, h := range hooks {
		h(out)
	}
	return out, nil
}

// stopped reports whether stop is closed; a nil stop never is.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// commit is the state of one Commit inside its transaction.
type commit struct {
	d     *DB
	tx    *bolt.Tx
	now   time.Time
	cause string
	cfg   ZoneConfig
	zones map[string]*zoneWork
	// clients are the VMs whose Client changed.
	clients []ClientUpdate
	probs   []string
	fills   fills
	// vms and hashes hold the VM entries and digests until the VMs are
	// applied (keyedWrites).
	vms, hashes *keyedWrites
	vmSeq       uint64 // of the VMs this commit stores first (newVMSeq)
}

// zoneWork collects one zone's changes.
type zoneWork struct {
	name     string
	wire     []byte
	apex     Apex
	meta     zoneMeta
	exists   bool // stored before this commit
	bucket   *bolt.Bucket
	apexDiff bool
	deleted  []JournalRR
	added    []JournalRR
	names    []NameUpdate
	work     map[string]*nameWork // the names the commit touches, by key
	remove   bool
	// floor, when raise is set, is a serial the new one must pass.
	floor uint32
	raise bool
}

// nameWork is one owner name whose candidates change.
type nameWork struct {
	zone  *zoneWork
	key   []byte
	owner []byte
	orig  []byte // stored candidates
	cands []candidate
	done  bool // finished: stored and journaled
}

func newCommit(tx *bolt.Tx, d *DB, cause string) (*commit, error) {
	c := &commit{d: d, tx: tx, now: d.now(), cause: cause, zones: map[string]*zoneWork{}, fills: fills{}}
	cfg, err := readZoneConfig(tx)
	if err != nil {
		return nil, err
	}
	c.cfg = cfg
	return c, nil
}

func readZoneConfig(tx *bolt.Tx) (ZoneConfig, error) {
	v := tx.Bucket(bucketConfig).Get(keyZoneConfig)
	if v == nil {
		return ZoneConfig{Forward: map[string]Apex{}}, nil
	}
	return decodeZoneConfig(v)
}

// zone returns the work record of zone, loading or creating it. It returns
// nil when the zone is not configured.
func (c *commit) zone(name string) (*zoneWork, error) {
	if z, ok := c.zones[name]; ok {
		return z, nil
	}
	apex, ok := c.cfg.apexFor(name)
	if !ok {
		return nil, nil
	}
	wire, err := ZoneWire(name)
	if err != nil {
		return nil, err
	}
	z := &zoneWork{name: name, wire: wire, apex: apex}
	if b := c.tx.Bucket(bucketZones).Bucket([]byte(name)); b != nil {
		m, err := decodeZoneMeta(b.Get(keyZoneMeta))
		if err != nil {
			return nil, fmt.Errorf("zone %s: %w", name, err)
		}
		z.meta, z.exists, z.bucket = m, true, b
		z.apexDiff = !m.Apex.equal(&apex)
	}
	c.zones[name] = z
	return z, nil
}

// setZoneConfig stores cfg and marks every zone whose apex changed or that
// left the configuration.
func (c *commit) setZoneConfig(cfg *ZoneConfig) error {
	c.cfg = ZoneConfig{Forward: maps.Clone(cfg.Forward), Reverse: cfg.Reverse, Catalog: cfg.Catalog}
	if c.cfg.Forward == nil {
		c.cfg.Forward = map[string]Apex{}
	}
	if err := c.tx.Bucket(bucketConfig).Put(keyZoneConfig, c.cfg.encode()); err != nil {
		return err
	}
	// Every configured forward zone (and the catalog) exists, even before
	// it has records.
	names := slices.Sorted(maps.Keys(c.cfg.Forward))
	if c.cfg.Catalog != nil {
		names = append(names, c.cfg.Catalog.Name)
	}
	for _, name := range names {
		if _, err := c.zone(name); err != nil {
			return err
		}
	}
	// Stored zones: apex changes and removals.
	return c.tx.Bucket(bucketZones).ForEachBucket(func(k []byte) error {
		name := string(k)
		z, err := c.zone(name)
		if err != nil {
			return err
		}
		if z != nil {
			return nil
		}
		b := c.tx.Bucket(bucketZones).Bucket(k)
		m, err := decodeZoneMeta(b.Get(keyZoneMeta))
		if err != nil {
			return fmt.Errorf("zone %s: %w", name, err)
		}
		// The removal names the zone by its wire form too: the DNS server
		// drops it from its snapshot by that key.
		wire, err := ZoneWire(name)
		if err != nil {
			return err
		}
		c.zones[name] = &zoneWork{name: name, wire: wire, remove: true, exists: true, bucket: b, meta: m}
		return nil
	})
}

// applyVM replaces the candidates vc.UUID contributes.
func (c *commit) applyVM(vc *VMChange) error {
	id, err := parseUUID(vc.UUID)
	if err != nil {
		return err
	}
	if c.vms == nil {
		hashes, err := c.tx.CreateBucketIfNotExists(bucketVMHashes)
		if err != nil {
			return err
		}
		c.vms, c.hashes = newKeyedWrites(c.tx.Bucket(bucketVMs)), newKeyedWrites(hashes)
	}
	uuidKey := []byte(formatUUID(id)) // the VM's key in vmhash, vmseen, clients
	entryKey, seq := c.entryKey(uuidKey, id)
	var oldNames []vmName
	oldRaw := c.vms.get(entryKey)
	if oldRaw != nil {
		old, err := decodeVMEntry(id, oldRaw)
		if err != nil {
			return fmt.Errorf("vm %s: %w", vc.UUID, err)
		}
		oldNames = old.names
	}

	var groups []*recordGroup
	zonesMissing := false // a record was left out for its zone
	if !vc.Delete {
		if groups, zonesMissing, err = c.groupRecords(vc, id); err != nil {
			return err
		}
	}

	// Names the VM fed before: drop its candidates there.
	for _, on := range oldNames {
		z, err := c.zone(on.zone)
		if err != nil {
			return err
		}
		if z == nil || z.remove {
			continue // the zone went away with its records
		}
		nw, err := c.name(z, on.key, nil)
		if err != nil {
			return err
		}
		nw.cands = slices.DeleteFunc(nw.cands, func(x candidate) bool { return x.vm == id })
	}
	// Names it feeds now.
	newNames := make([]vmName, 0, len(groups))
	for _, g := range groups {
		nw, err := c.name(g.zone, g.key, nil)
		if err != nil {
			return err
		}
		nw.cands = slices.DeleteFunc(nw.cands, func(x candidate) bool { return x.vm == id })
		nw.cands = append(nw.cands, g.rrs...)
		newNames = append(newNames, vmName{zone: g.zone.name, key: g.key})
	}

	if err := c.applyClient(uuidKey, vc); err != nil {
		return err
	}
	if vc.Delete {
		c.hashes.put(uuidKey, nil)
		if oldRaw != nil {
			c.vms.put(entryKey, nil)
		}
		return deleteLastSeen(c.tx, uuidKey)
	}
	// Every stored VM has an entry, so VMHashes lists them all.
	c.hashes.put(uuidKey, vmHashValue(vc.Hash, seq))
	entry := vc.entry // the same names, unless a zone was missing
	if entry == nil || zonesMissing {
		if entry, err = vmEntryOf(vc, id, newNames); err != nil {
			return fmt.Errorf("vm %s: %w", vc.UUID, err)
		}
	}
	if !bytes.Equal(entry, oldRaw) {
		c.vms.put(entryKey, entry)
	}
	return nil
}

// recordGroup is a VM's new records at one owner name.
type recordGroup struct {
	zone *zoneWork
	key  []byte
	rrs  []candidate
}

// groupRecords groups vc's records by owner name, in the order they come.
// A record the store cannot take (no such zone, a name outside its zone,
// a bad pref) is left out and reported as a problem of the commit;
// zonesMissing tells whether one was left out for its zone.
func (c *commit) groupRecords(vc *VMChange, id [16]byte) (groups []*recordGroup, zonesMissing bool, err error) {
	group := func(z *zoneWork, key, rr []byte, pref uint8, stamp uint64) {
		g := findGroup(groups, z, key)
		if g == nil {
			g = &recordGroup{zone: z, key: key}
			groups = append(groups, g)
		}
		g.rrs = append(g.rrs, candidate{vm: id, pref: pref, stamp: stamp, rr: rr})
	}
	if p := vc.prepared; p != nil {
		for i := range p.recs {
			zone, key, rr := p.record(i)
			z, err := c.zone(zone)
			if err != nil {
				return nil, false, err
			}
			if z == nil || z.remove {
				zw, _ := ZoneWire(zone)
				c.problem("vm %s: %s record %s: zone %q is not configured", vc.UUID, dns.TypeToString[RRType(rr)], WireToString(keyToWire(key, zw)), zone)
				zonesMissing = true
				continue
			}
			group(z, key, rr, p.recs[i].pref, p.recs[i].stamp)
		}
		return groups, zonesMissing, nil
	}
	for _, r := range vc.Records {
		z, err := c.zone(r.Zone)
		if err != nil {
			return nil, false, err
		}
		if z == nil || z.remove {
			c.problem("vm %s: %s record %s: zone %q is not configured", vc.UUID, r.typeString(), r.name(), r.Zone)
			zonesMissing = true
			continue
		}
		w := r.wire
		if w == nil { // not prepared (PrepareRecords)
			e, _, _, _ := encodeRecord(r.RR, z.wire, nil, nil)
			w = &e
		}
		if err := w.unstorable(&r, z.name); err != nil {
			c.problem("vm %s: %v", vc.UUID, err)
			continue
		}
		group(z, w.key(), w.rr(), r.Pref, r.Stamp)
	}
	return groups, zonesMissing, nil
}

// findGroup returns the group of groups at key in z, nil if none. A VM
// has a few names: a search through them costs less than a map.
func findGroup(groups []*recordGroup, z *zoneWork, key []byte) *recordGroup {
	for _, g := range groups {
		if g.zone == z && bytes.Equal(g.key, key) {
			return g
		}
	}
	return nil
}

// name returns the work record of one owner name, loading its stored
// candidates on first use.
func (c *commit) name(z *zoneWork, key, owner []byte) (*nameWork, error) {
	if nw, ok := z.work[string(key)]; ok {
		return nw, nil
	}
	if owner == nil {
		owner = keyToWire(key, z.wire)
	}
	nw := &nameWork{zone: z, key: slices.Clone(key), owner: owner}
	if z.bucket != nil {
		if v := z.bucket.Bucket(bucketNames).Get(key); v != nil {
			nw.orig = slices.Clone(v)
			cands, err := decodeCandidates(nw.orig)
			if err != nil {
				return nil, fmt.Errorf("zone %s name %s: %w", z.name, WireToString(owner), err)
			}
			nw.cands = cands
		}
	}
	if z.work == nil {
		z.work = map[string]*nameWork{}
	}
	z.work[string(nw.key)] = nw
	return nw, nil
}

// finish writes the changed names, then gives every changed zone its new
// serial and journal entry.
func (c *commit) finish() (*Committed, error) {
	out := &Committed{}
	if err := c.finishNames(); err != nil {
		return nil, err
	}
	if c.cfg.Catalog != nil {
		if err := c.updateCatalog(); err != nil {
			return nil, err
		}
		if err := c.finishNames(); err != nil {
			return nil, err
		}
	}
	zones := c.tx.Bucket(bucketZones)
	tomb := c.tx.Bucket(bucketTombstones)
	for _, name := range slices.Sorted(maps.Keys(c.zones)) {
		z := c.zones[name]
		switch c.fate(z) {
		case zoneRemoved:
			if err := tomb.Put([]byte(name), u32bytes(z.meta.Serial)); err != nil {
				return nil, err
			}
			if err := zones.DeleteBucket([]byte(name)); err != nil {
				return nil, err
			}
			out.Zones = append(out.Zones, ZoneUpdate{Zone: name, Wire: z.wire, Removed: true})
		case zoneChanged:
			u, err := c.finishZone(z, zones, tomb)
			if err != nil {
				return nil, err
			}
			out.Zones = append(out.Zones, u)
		}
	}
	out.Problems = c.probs
	out.Clients = c.clients
	return out, nil
}

// finishNames finishes every name not finished yet, in a stable order
// (zone, then key) so journals are deterministic.
func (c *commit) finishNames() error {
	c.growZoneLists()
	for _, zone := range slices.Sorted(maps.Keys(c.zones)) {
		z := c.zones[zone]
		for _, key := range slices.Sorted(maps.Keys(z.work)) {
			nw := z.work[key]
			if nw.done {
				continue
			}
			nw.done = true
			if err := c.finishName(nw); err != nil {
				return err
			}
		}
	}
	return nil
}

// zoneFate is what a commit does to a zone.
type zoneFate int

const (
	zoneUnchanged zoneFate = iota
	zoneChanged            // created, or new records or apex
	zoneRemoved            // left the configuration, or a reverse zone emptied
)

func (c *commit) fate(z *zoneWork) zoneFate {
	switch {
	case z.remove || (isReverseZone(z.name) && z.exists && z.meta.Names == 0 && len(z.added) == 0 && len(z.deleted) > 0):
		return zoneRemoved
	case z.exists && !z.apexDiff && !z.raise && len(z.added) == 0 && len(z.deleted) == 0:
		return zoneUnchanged
	case !z.exists && isReverseZone(z.name) && len(z.added) == 0:
		return zoneUnchanged // a reverse zone is created by its first record
	}
	return zoneChanged
}

// finishName stores one name's candidates and records what it publishes
// differently now.
func (c *commit) finishName(nw *nameWork) error {
	z := nw.zone
	sortCandidates(nw.cands)
	enc := encodeCandidates(nw.cands)
	if bytes.Equal(enc, nw.orig) {
		return nil
	}
	if err := c.ensureBucket(z); err != nil {
		return err
	}
	names := z.bucket.Bucket(bucketNames)
	if len(nw.cands) == 0 {
		if err := c.fills.del(names, nw.key); err != nil {
			return err
		}
	} else if err := c.fills.put(names, nw.key, enc); err != nil {
		return err
	}
	origCands, err := decodeCandidates(nw.orig)
	if err != nil {
		return err
	}
	before, _ := c.d.policy.publish(origCands)
	after, cuts := c.d.policy.publish(nw.cands)
	for _, cut := range cuts {
		c.problem("%s %s: %d records, served %d (max_rrset)", WireToString(nw.owner), dns.TypeToString[cut.Type], cut.Total, cut.Kept)
	}
	for _, d := range disagreements(nw.cands) {
		c.problem("%s %s: %d VMs disagree (%d different records); serving the newest, vm %s's",
			WireToString(nw.owner), dns.TypeToString[d.Type], d.VMs, d.Values, formatUUID(d.Winner))
	}
	if bytes.Equal(before, after) {
		return nil
	}
	del, add := diffRRs(before, after)
	for _, rr := range del {
		z.deleted = append(z.deleted, JournalRR{Owner: nw.owner, RR: rr})
	}
	for _, rr := range add {
		z.added = append(z.added, JournalRR{Owner: nw.owner, RR: rr})
	}
	z.meta.Records = uint32(int(z.meta.Records) + len(add) - len(del))
	switch {
	case len(before) == 0 && len(after) > 0:
		z.meta.Names++
	case len(before) > 0 && len(after) == 0:
		z.meta.Names--
	}
	z.names = append(z.names, NameUpdate{Owner: nw.owner, RRs: after})
	return nil
}

// ensureBucket creates the zone's bucket when it is first written.
func (c *commit) ensureBucket(z *zoneWork) error {
	if z.bucket != nil {
		return nil
	}
	b, err := c.tx.Bucket(bucketZones).CreateBucket([]byte(z.name))
	if err != nil {
		return fmt.Errorf("create zone %s: %w", z.name, err)
	}
	if _, err := b.CreateBucket(bucketNames); err != nil {
		return err
	}
	if _, err := b.CreateBucket(bucketJournal); err != nil {
		return err
	}
	z.bucket = b
	return nil
}

// finishZone gives a changed zone its next serial and journal entry.
func (c *commit) finishZone(z *zoneWork, zones, tomb *bolt.Bucket) (ZoneUpdate, error) {
	if err := c.ensureBucket(z); err != nil {
		return ZoneUpdate{}, err
	}
	last, have := z.meta.Serial, z.exists
	if !have {
		if t := tomb.Get([]byte(z.name)); len(t) == 4 {
			last, have = beU32(t), true
		}
	}
	serial := nextSerial(last, have, c.now)
	if z.raise && !SerialLess(z.floor, serial) {
		serial = nonZero(z.floor + 1)
	}
	prevApex := z.meta.Apex
	if z.apexDiff {
		oldNS, err := prevApex.nsRRs(z.name)
		if err != nil {
			return ZoneUpdate{}, err
		}
		newNS, err := z.apex.nsRRs(z.name)
		if err != nil {
			return ZoneUpdate{}, err
		}
		del, add := diffRRs(oldNS, newNS)
		for _, rr := range del {
			z.deleted = append(z.deleted, JournalRR{Owner: z.wire, RR: rr})
		}
		for _, rr := range add {
			z.added = append(z.added, JournalRR{Owner: z.wire, RR: rr})
		}
	}
	u := ZoneUpdate{Zone: z.name, Wire: z.wire, Serial: serial, Apex: z.apex, Names: z.names}
	if z.exists {
		soaFrom, err := EncodeRR(prevApex.SOA(z.name, z.meta.Serial))
		if err != nil {
			return ZoneUpdate{}, err
		}
		soaTo, err := EncodeRR(z.apex.SOA(z.name, serial))
		if err != nil {
			return ZoneUpdate{}, err
		}
		e := &JournalEntry{From: z.meta.Serial, To: serial, Time: c.now, Cause: c.cause,
			SOAFrom: soaFrom, SOATo: soaTo, Deleted: z.deleted, Added: z.added}
		v := e.encode(z.wire)
		if err := z.bucket.Bucket(bucketJournal).Put(u64key(z.meta.NextSeq), v); err != nil {
			return ZoneUpdate{}, err
		}
		z.meta.NextSeq++
		z.meta.JEntries++
		z.meta.JBytes += uint64(len(v))
		if err := trimJournal(z.bucket.Bucket(bucketJournal), &z.meta, c.d.journal, c.now); err != nil {
			return ZoneUpdate{}, err
		}
		if err := trimUnusable(z.bucket.Bucket(bucketJournal), &z.meta, e.ixfrRecords()); err != nil {
			return ZoneUpdate{}, err
		}
		u.Entry = e
	}
	z.meta.Serial = serial
	z.meta.LastChange = c.now
	z.meta.Apex = z.apex
	if err := z.bucket.Put(keyZoneMeta, z.meta.encode()); err != nil {
		return ZoneUpdate{}, err
	}
	return u, nil
}

func (c *commit) problem(format string, args ...any) {
	c.probs = append(c.probs, fmt.Sprintf(format, args...))
}
