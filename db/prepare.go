package db

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/miekg/dns"
)

// Work taken out of a commit's write transaction, which one goroutine at a
// time runs: records encoded ahead by the goroutine that computed them, and
// lists sized once for a big chunk.

// recordWire is a Record in the store's encoding. groupRecords checks it in
// the order it checks a record it encodes itself, so the problems reported
// are the same.
//
// A first load's chunk holds tens of thousands of VMs' records from when
// they are computed until their commit ends, beside the next chunk's, so
// the encoding is kept small: the owner's key and the record in one slice
// of the VM's arena (PrepareRecords). The owner's wire name is not kept:
// the commit makes it from the key once per name (commit.name), where it
// would otherwise be held once per record.
type recordWire struct {
	b       []byte // the owner's key, then the record (when below)
	keyLen  uint8  // a wire name is at most 255 octets
	ownerOK bool   // the owner encoded (else err says why)
	below   bool   // the owner is below the zone: the key is set
	// err is why the owner (!ownerOK) or, below the zone, the record
	// could not be encoded.
	err error
}

// key is the owner relative to the record's zone (relativeKey), when below.
func (w *recordWire) key() []byte {
	if !w.below {
		return nil
	}
	return w.b[:w.keyLen:w.keyLen]
}

// rr is the record as the store keeps it (EncodeRR), when below and encoded.
func (w *recordWire) rr() []byte {
	if !w.below || w.err != nil {
		return nil
	}
	return w.b[w.keyLen:]
}

// encodeRecord encodes rr for the zone zoneWire, appending its bytes to
// arena (returned grown, with w.b a slice of it) and packing in buf
// (returned for the next call). packed is rr as dns.PackRR packs it
// uncompressed (buf's, not changed), nil when it does not pack. The owner
// and the RDATA come from that one packing; a record that does not pack is
// encoded as its parts would be, for the same problems: the owner, then
// the record.
func encodeRecord(rr dns.RR, zoneWire, buf, arena []byte) (w recordWire, nextBuf, nextArena, packed []byte) {
	packed, buf, err := packRR(rr, buf)
	off := 0
	if err == nil {
		off, err = skipName(packed, 0)
	}
	var owner [256]byte // lower case
	var ownerLen int
	var data []byte
	if err != nil {
		packed = nil
		name, nameErr := wireName(rr.Header().Name)
		if nameErr != nil {
			w.err = nameErr
			return w, buf, arena, nil
		}
		ownerLen = copy(owner[:], name)
	} else {
		ownerLen = copy(owner[:], packed[:off])
		lowerASCII(owner[:ownerLen])
		data = packed[off:]
	}
	w.ownerOK = true
	start := len(arena)
	arena, w.below = appendRelativeKey(arena, owner[:ownerLen], zoneWire)
	if w.below {
		w.keyLen = uint8(len(arena) - start)
		if data == nil {
			w.err = err
		} else {
			arena = append(arena, data...)
			lowerRDataNames(arena[len(arena)-len(data):])
		}
	}
	w.b = arena[start:len(arena):len(arena)]
	return w, buf, arena, packed
}

// PrepareRecords encodes vc's records the way Commit stores them. Commit
// encodes the records that are not prepared itself; preparing them on the
// goroutine that computed them takes that work out of the transaction.
// packed, when not nil, is called with each record's index and the record
// as dns.PackRR packs it uncompressed (nil when it was not packed), valid
// during the call: the feeds hash what they computed without packing it
// again.
//
// A record the store takes as it is encoded lets go of its RR (Record.RR
// is nil after the call): the encoding is all the commit needs of it, and
// the RRs were a quarter of what a first load's chunk held until its
// commit. A record the store refuses keeps it, for the problem reported.
func PrepareRecords(vc *VMChange, packed func(i int, wire []byte)) {
	var zone string
	var zoneWire, p []byte
	var zoneErr error
	scratch := prepareScratch.Get().(*prepareBufs)
	buf, arena := scratch.pack, scratch.arena[:0]
	wires := make([]recordWire, len(vc.Records))
	for i := range vc.Records {
		r := &vc.Records[i]
		if i == 0 || r.Zone != zone {
			zone = r.Zone
			zoneWire, zoneErr = ZoneWire(zone)
		}
		p = nil
		if zoneErr == nil && r.RR != nil { // else the commit finds out for itself
			wires[i], buf, arena, p = encodeRecord(r.RR, zoneWire, buf, arena)
			r.wire = &wires[i]
		}
		if packed != nil {
			packed(i, p)
		}
	}
	// One allocation of the VM's encoded records, their exact size: the
	// wires point into it in the order they were appended.
	exact := bytes.Clone(arena)
	off := 0
	for i := range wires {
		if n := len(wires[i].b); n > 0 {
			wires[i].b = exact[off : off+n : off+n]
			off += n
		}
	}
	scratch.pack, scratch.arena = buf, arena[:0]
	prepareScratch.Put(scratch)
	vc.entry = preparedEntry(vc)
	if vc.entry != nil {
		vc.Meta = nil // (the entry holds it: vmEntryOf)
	}
	if p := compactRecords(vc.Records, exact); p != nil {
		vc.prepared, vc.Records = p, nil
		return
	}
	for i := range vc.Records {
		if r := &vc.Records[i]; r.wire != nil && r.wire.unstorable(r, r.Zone) == nil {
			r.RR = nil
		}
	}
}

// preparedRecords are a VM's records as PrepareRecords leaves them when
// the store takes every one as it is encoded (the common case): their
// encodings one after the other in the VM's arena, and per record where
// its bytes end and what else the commit reads of it. 16 bytes a record
// here, where a Record and its recordWire took 104.
type preparedRecords struct {
	arena []byte
	zones []string // the records' zones, each once
	recs  []preparedRecord
}

type preparedRecord struct {
	end    uint32 // where its bytes end in the arena (they begin where the record before ends)
	keyLen uint8
	zone   uint8 // in zones
	pref   uint8
	stamp  uint64
}

// compactRecords returns rs as preparedRecords, their bytes in arena as
// PrepareRecords appended them, or nil when one is not prepared or not
// storable (it keeps its RR, for the problem the commit reports), or the
// VM has more zones than a byte counts.
func compactRecords(rs []Record, arena []byte) *preparedRecords {
	p := &preparedRecords{arena: arena, recs: make([]preparedRecord, len(rs))}
	end := 0
	for i := range rs {
		r := &rs[i]
		if r.wire == nil || r.wire.unstorable(r, r.Zone) != nil {
			return nil
		}
		z := slices.Index(p.zones, r.Zone)
		if z < 0 {
			if z = len(p.zones); z > 255 {
				return nil
			}
			p.zones = append(p.zones, r.Zone)
		}
		end += len(r.wire.b)
		p.recs[i] = preparedRecord{end: uint32(end), keyLen: r.wire.keyLen, zone: uint8(z), pref: r.Pref, stamp: r.Stamp}
	}
	return p
}

// record returns the i-th record's zone, owner key and record bytes.
func (p *preparedRecords) record(i int) (zone string, key, rr []byte) {
	start := uint32(0)
	if i > 0 {
		start = p.recs[i-1].end
	}
	r := &p.recs[i]
	b := p.arena[start:r.end:r.end]
	return p.zones[r.zone], b[:r.keyLen:r.keyLen], b[r.keyLen:]
}

// RecordCount returns how many records vc carries, prepared or not.
func (vc *VMChange) RecordCount() int {
	if vc.prepared != nil {
		return len(vc.prepared.recs)
	}
	return len(vc.Records)
}

// StoredMeta returns the meta vc stores: Meta, or, once PrepareRecords
// encoded the entry ahead, the entry's.
func (vc *VMChange) StoredMeta() ([]byte, error) {
	if vc.entry == nil {
		return vc.Meta, nil
	}
	id, err := parseUUID(vc.UUID)
	if err != nil {
		return nil, err
	}
	e, err := decodeVMEntry(id, vc.entry)
	return e.meta, err
}

// vmEntryOf returns the entry to store for vc, whose names are names: the
// one encoded ahead, or one encoded now (a record's zone was missing). A
// VM whose entry was encoded ahead gave its meta up to it.
func vmEntryOf(vc *VMChange, id [16]byte, names []vmName) ([]byte, error) {
	meta, err := vc.StoredMeta()
	if err != nil {
		return nil, err
	}
	return (&vmEntry{meta: meta, names: names}).encode(id), nil
}

// name is r's owner name as text: RR's, or, once PrepareRecords let go
// of it, the encoded owner's (lower case).
func (r *Record) name() string {
	if r.RR != nil {
		return r.RR.Header().Name
	}
	zoneWire, err := ZoneWire(r.Zone)
	if err != nil || !r.wire.below {
		return "<name unknown>" // (never: such a record keeps its RR)
	}
	return WireToString(keyToWire(r.wire.key(), zoneWire))
}

// rrtype is r's record type (see name).
func (r *Record) rrtype() uint16 {
	if r.RR != nil {
		return r.RR.Header().Rrtype
	}
	return RRType(r.wire.rr())
}

// typeString is r's record type as text (see name).
func (r *Record) typeString() string { return dns.TypeToString[r.rrtype()] }

// EachRecord calls fn with the zone, the owner name (fully qualified;
// lower case once PrepareRecords encoded it) and the type of each of
// vc's records, prepared or not.
func (vc *VMChange) EachRecord(fn func(zone, owner string, rrtype uint16)) {
	p := vc.prepared
	if p == nil {
		for i := range vc.Records {
			r := &vc.Records[i]
			fn(r.Zone, r.name(), r.rrtype())
		}
		return
	}
	wires := make([][]byte, len(p.zones))
	for i := range p.recs {
		zone, key, rr := p.record(i)
		zw := wires[p.recs[i].zone]
		if zw == nil {
			var err error
			if zw, err = ZoneWire(zone); err != nil {
				continue // (never: the record was stored under it)
			}
			wires[p.recs[i].zone] = zw
		}
		fn(zone, WireToString(keyToWire(key, zw)), RRType(rr))
	}
}

// prepareBufs are PrepareRecords' buffers, reused from VM to VM.
type prepareBufs struct{ pack, arena []byte }

var prepareScratch = sync.Pool{New: func() any { return new(prepareBufs) }}

// preparedEntry encodes vc's stored entry for when every record's zone is
// configured, which only the commit knows: the names of the records
// groupRecords keeps then, in the order it finds them. nil when a record
// is not prepared.
func preparedEntry(vc *VMChange) []byte {
	id, err := parseUUID(vc.UUID)
	if err != nil || vc.Delete {
		return nil
	}
	var names []vmName
	for i := range vc.Records {
		r := &vc.Records[i]
		w := r.wire
		switch {
		case w == nil:
			return nil
		case w.unstorable(r, r.Zone) != nil:
			continue // left out, as groupRecords does
		}
		if !slices.ContainsFunc(names, func(n vmName) bool { return n.zone == r.Zone && bytes.Equal(n.key, w.key()) }) {
			names = append(names, vmName{zone: r.Zone, key: w.key()})
		}
	}
	return (&vmEntry{meta: vc.Meta, names: names}).encode(id)
}

// unstorable says why the store does not take r, encoded as w for zone,
// or nil when it does: groupRecords reports it as a problem of the
// commit, and preparedEntry leaves the record's name out of the VM's
// entry the same way. (A record it takes may have let go of its RR.)
func (w *recordWire) unstorable(r *Record, zone string) error {
	switch {
	case !w.ownerOK:
		return w.err
	case !w.below:
		return fmt.Errorf("record %s is not below zone %s", r.RR.Header().Name, zone)
	case w.err != nil:
		return w.err
	case r.Pref >= candStamped:
		return fmt.Errorf("record %s: pref %d is not below %d", r.RR.Header().Name, r.Pref, candStamped)
	}
	return nil
}

// growZoneLists sizes the zones' lists for the names finishNames is about
// to finish: a chunk of a first load adds a hundred thousand names, which
// would otherwise grow the lists name by name.
func (c *commit) growZoneLists() {
	for _, z := range c.zones {
		n := 0
		for _, nw := range z.work {
			if !nw.done {
				n++
			}
		}
		z.names = slices.Grow(z.names, n)
		z.added = slices.Grow(z.added, n)
	}
}
