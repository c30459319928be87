package serve

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

// snapshot is every zone as served at one moment. It is never modified:
// a commit builds a new snapshot that shares what did not change, and
// swaps it in with one atomic store.
type snapshot struct {
	zones map[string]*zone // by lower-case wire name
	// zoneLens has bit l set when a zone's wire name is l bytes long:
	// findZone looks up only the suffixes of a question that long.
	zoneLens [4]uint64
	// clients identifies the instances that ask (nil: client answers off).
	clients *clientIndex
}

// newSnapshot serves zones (which it keeps: the map must not change).
func newSnapshot(zones map[string]*zone, clients *clientIndex) *snapshot {
	s := &snapshot{zones: zones, clients: clients}
	for w := range zones {
		s.zoneLens[len(w)>>6] |= 1 << (len(w) & 63)
	}
	return s
}

// zone is one zone at one serial.
type zone struct {
	name   string // lower case, no trailing dot
	wire   []byte
	serial uint32
	apex   db.Apex
	// apexRRs is what the apex publishes (NS, then SOA) in db.RRs form.
	apexRRs []byte
	// negSOA is the SOA for the authority section of negative answers, its
	// TTL lowered to the SOA MINIMUM (RFC 2308 §5).
	negSOA []byte
	// names holds every owner name below the apex; nil while the zone is
	// cold, when lookups go to the store.
	names *table
	store *db.DB
	// kindNodes is set when svc.<zone> or inst.<zone> exists: only then
	// can a name shaped like an owner-less one (web.svc.<zone>) exist, and
	// client answers must look it up before giving its scoped meaning.
	kindNodes bool
}

// setNames installs the zone's in-memory table.
func (z *zone) setNames(t *table) {
	z.names = t
	for _, kind := range [][]byte{labelSvc, labelInst} {
		if _, found := t.lookup(append(slices.Clip(kind), z.wire...)); found {
			z.kindNodes = true
		}
	}
}

func newZone(name string, wire []byte, serial uint32, apex db.Apex, store *db.DB) (*zone, error) {
	soa, err := db.EncodeRR(apex.SOA(name, serial))
	if err != nil {
		return nil, fmt.Errorf("zone %s: SOA: %w", name, err)
	}
	var rrs []byte
	for _, ns := range apex.NSRecords(name) {
		b, err := db.EncodeRR(ns)
		if err != nil {
			return nil, fmt.Errorf("zone %s: NS: %w", name, err)
		}
		rrs = append(rrs, b...)
	}
	neg := bytes.Clone(soa)
	if apex.Minimum < apex.SOATTL {
		neg[4], neg[5], neg[6], neg[7] = byte(apex.Minimum>>24), byte(apex.Minimum>>16), byte(apex.Minimum>>8), byte(apex.Minimum)
	}
	return &zone{name: name, wire: wire, serial: serial, apex: apex, apexRRs: append(rrs, soa...), negSOA: neg, store: store}, nil
}

// soa returns the zone's SOA record in db.RRs form.
func (z *zone) soa() []byte {
	run, _ := rrsOfType(z.apexRRs, dns.TypeSOA)
	return run
}

// findZone returns the zone that holds the lower-case wire name, the
// deepest one when zones nest, and the offset of its apex inside name.
func (s *snapshot) findZone(name []byte) (*zone, int) {
	for off := 0; off < len(name) && name[off] != 0; off += int(name[off]) + 1 {
		l := len(name) - off
		if l > 255 || s.zoneLens[l>>6]&(1<<(l&63)) == 0 {
			continue // no zone this long: no need to hash the suffix
		}
		if z, ok := s.zones[string(name[off:])]; ok {
			return z, off
		}
	}
	return nil, 0
}

// node returns the records at name (lower-case wire, inside the zone) and
// whether the name exists.
func (z *zone) node(name []byte) (rrs []byte, found bool, err error) {
	if len(name) == len(z.wire) {
		return z.apexRRs, true, nil
	}
	if z.names != nil {
		rrs, found = z.names.lookup(name)
		return rrs, found, nil
	}
	rrs, below, err := z.store.Lookup(z.name, z.wire, name)
	return rrs, len(rrs) > 0 || below, err
}

// contains reports whether the wire name is the zone apex or below it.
func (z *zone) contains(name []byte) bool {
	if len(name) < len(z.wire) || !bytes.Equal(name[len(name)-len(z.wire):], z.wire) {
		return false
	}
	for off := 0; off < len(name); off += int(name[off]) + 1 {
		if off == len(name)-len(z.wire) {
			return true
		}
	}
	return false
}

// applyCommit returns the snapshot after c.
func (s *snapshot) applyCommit(c *db.Committed, store *db.DB) (*snapshot, error) {
	zones := maps.Clone(s.zones)
	for _, zu := range c.Zones {
		key := string(zu.Wire)
		if zu.Removed {
			delete(zones, key)
			continue
		}
		nz, err := newZone(zu.Zone, zu.Wire, zu.Serial, zu.Apex, store)
		if err != nil {
			return nil, err
		}
		prev := zones[key]
		switch {
		case prev != nil && prev.names == nil:
			// Cold: the store already holds the new records.
		case store.Backlog().IsOpen():
			// A chunk of a backlog: the zone is served from the store,
			// which holds the records, until the backlog is in and its
			// table is built once (Server.rewarmAfterBacklog). Updating the
			// table for every chunk rewrote nearly all of its shards each
			// time (a 1M-VM first load: 17 GB of garbage, a quarter of
			// all it allocated).
		case prev == nil:
			// A new zone: every name is in the update.
			names := make([]string, 0, len(zu.Names))
			rrs := make([][]byte, 0, len(zu.Names))
			for _, n := range zu.Names {
				if len(n.RRs) > 0 {
					names = append(names, string(n.Owner))
					rrs = append(rrs, n.RRs)
				}
			}
			nz.setNames(buildTable(zu.Wire, names, rrs))
		default:
			changes := make(map[string][]byte, len(zu.Names))
			for _, n := range zu.Names {
				changes[string(n.Owner)] = n.RRs
			}
			nz.setNames(prev.names.update(zu.Wire, changes))
		}
		zones[key] = nz
	}
	clients := s.clients
	if clients != nil && len(c.Clients) > 0 {
		clients = clients.apply(c.Clients)
	}
	return newSnapshot(zones, clients), nil
}
