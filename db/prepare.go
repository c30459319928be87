package db

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/miekg/dns"
)

// Work taken out of a commit's write transaction, which one goroutine at a
// time runs: records encoded ahead by the goroutine that computed them, and
// lists sized once for a big chunk.

// recordWire is a Record in the store's encoding. groupRecords checks it in
// the order it checks a record it encodes itself, so the problems reported
// are the same.
type recordWire struct {
	owner    []byte // absolute wire name, lower case
	ownerErr error
	key      []byte // relative to the record's zone
	below    bool   // owner is below the zone (key is set)
	rr       []byte // set when below
	rrErr    error
}

// encodeRecord encodes rr for the zone zoneWire, packing in buf (returned
// for the next call). packed is rr as dns.PackRR packs it uncompressed
// (buf's), nil when it does not pack. The owner and the RDATA come from
// that one packing; a record that does not pack is encoded as its parts
// would be, for the same problems: the owner, then the record.
func encodeRecord(rr dns.RR, zoneWire, buf []byte) (w *recordWire, next, packed []byte) {
	w = &recordWire{}
	packed, buf, err := packRR(rr, buf)
	off := 0
	if err == nil {
		off, err = skipName(packed, 0)
	}
	if err != nil {
		if w.owner, w.ownerErr = wireName(rr.Header().Name); w.ownerErr == nil {
			if w.key, w.below = relativeKey(w.owner, zoneWire); w.below {
				w.rrErr = err
			}
		}
		return w, buf, nil
	}
	w.owner = lowerASCII(bytes.Clone(packed[:off]))
	if w.key, w.below = relativeKey(w.owner, zoneWire); w.below {
		w.rr = slices.Clone(packed[off:])
		lowerRDataNames(w.rr)
	}
	return w, buf, packed
}

// PrepareRecords encodes vc's records the way Commit stores them. Commit
// encodes the records that are not prepared itself; preparing them on the
// goroutine that computed them takes that work out of the transaction.
// packed, when not nil, is called with each record's index and the record
// as dns.PackRR packs it uncompressed (nil when it was not packed), valid
// during the call: the feeds hash what they computed without packing it
// again.
func PrepareRecords(vc *VMChange, packed func(i int, wire []byte)) {
	var zone string
	var zoneWire, buf, p []byte
	var zoneErr error
	for i := range vc.Records {
		r := &vc.Records[i]
		if i == 0 || r.Zone != zone {
			zone = r.Zone
			zoneWire, zoneErr = ZoneWire(zone)
		}
		p = nil
		if zoneErr == nil && r.RR != nil { // else the commit finds out for itself
			r.wire, buf, p = encodeRecord(r.RR, zoneWire, buf)
		}
		if packed != nil {
			packed(i, p)
		}
	}
	vc.entry = preparedEntry(vc)
}

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
		if !slices.ContainsFunc(names, func(n vmName) bool { return n.zone == r.Zone && bytes.Equal(n.key, w.key) }) {
			names = append(names, vmName{zone: r.Zone, key: w.key})
		}
	}
	return (&vmEntry{meta: vc.Meta, names: names}).encode(id)
}

// unstorable says why the store does not take r, encoded as w for zone,
// or nil when it does: groupRecords reports it as a problem of the
// commit, and preparedEntry leaves the record's name out of the VM's
// entry the same way.
func (w *recordWire) unstorable(r *Record, zone string) error {
	switch {
	case w.ownerErr != nil:
		return w.ownerErr
	case !w.below:
		return fmt.Errorf("record %s is not below zone %s", r.RR.Header().Name, zone)
	case w.rrErr != nil:
		return w.rrErr
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
