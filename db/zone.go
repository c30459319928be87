package db

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/miekg/dns"
)

// Apex is what a zone's apex holds besides the serial: the SOA fields and
// the NS set. It comes from configuration.
type Apex struct {
	MName   string // SOA MNAME, fully qualified
	RName   string // SOA RNAME, fully qualified (hostmaster with @ → .)
	Refresh uint32
	Retry   uint32
	Expire  uint32
	Minimum uint32
	SOATTL  uint32
	// NS are the name servers, fully qualified, in configuration order.
	NS    []string
	NSTTL uint32
}

// SOA builds the zone's SOA record at serial.
func (a *Apex) SOA(zone string, serial uint32) *dns.SOA {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: dns.Fqdn(zone), Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: a.SOATTL},
		Ns:      dns.Fqdn(a.MName),
		Mbox:    dns.Fqdn(a.RName),
		Serial:  serial,
		Refresh: a.Refresh,
		Retry:   a.Retry,
		Expire:  a.Expire,
		Minttl:  a.Minimum,
	}
}

// NSRecords builds the zone's NS records.
func (a *Apex) NSRecords(zone string) []dns.RR {
	out := make([]dns.RR, 0, len(a.NS))
	for _, ns := range a.NS {
		out = append(out, &dns.NS{
			Hdr: dns.RR_Header{Name: dns.Fqdn(zone), Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: a.NSTTL},
			Ns:  dns.Fqdn(ns),
		})
	}
	return out
}

// nsRRs returns the NS set in the store's record encoding, canonical order.
func (a *Apex) nsRRs(zone string) (RRs, error) {
	var rrs [][]byte
	for _, rr := range a.NSRecords(zone) {
		b, err := EncodeRR(rr)
		if err != nil {
			return nil, err
		}
		rrs = append(rrs, b)
	}
	slices.SortFunc(rrs, compareRR)
	rrs = slices.CompactFunc(rrs, func(a, b []byte) bool { return compareRR(a, b) == 0 })
	var out []byte
	for _, b := range rrs {
		out = append(out, b...)
	}
	return out, nil
}

func (a *Apex) equal(b *Apex) bool {
	return a.MName == b.MName && a.RName == b.RName && a.Refresh == b.Refresh &&
		a.Retry == b.Retry && a.Expire == b.Expire && a.Minimum == b.Minimum &&
		a.SOATTL == b.SOATTL && a.NSTTL == b.NSTTL && slices.Equal(a.NS, b.NS)
}

func (a *Apex) encode(e *enc) {
	e.Str16(a.MName)
	e.Str16(a.RName)
	e.U32(a.Refresh)
	e.U32(a.Retry)
	e.U32(a.Expire)
	e.U32(a.Minimum)
	e.U32(a.SOATTL)
	e.U32(a.NSTTL)
	e.U16(uint16(len(a.NS)))
	for _, ns := range a.NS {
		e.Str16(ns)
	}
}

func decodeApex(d *dec) Apex {
	a := Apex{
		MName: d.Str16(), RName: d.Str16(),
		Refresh: d.U32(), Retry: d.U32(), Expire: d.U32(), Minimum: d.U32(),
		SOATTL: d.U32(), NSTTL: d.U32(),
	}
	n := int(d.U16())
	for i := 0; i < n && d.Err == nil; i++ {
		a.NS = append(a.NS, d.Str16())
	}
	return a
}

// ZoneConfig is the configured apex of every zone: forward zones by name
// (lower case, no trailing dot) and one apex shared by all reverse zones,
// which exist wherever a listed address needs a PTR.
type ZoneConfig struct {
	Forward map[string]Apex
	Reverse Apex
	// Catalog, when set, is kept as a catalog of all the other zones.
	Catalog *CatalogConfig
}

// apexFor returns the apex of zone and whether the zone may exist.
func (c *ZoneConfig) apexFor(zone string) (Apex, bool) {
	if a, ok := c.Forward[zone]; ok {
		return a, true
	}
	if c.Catalog != nil && zone == c.Catalog.Name {
		return c.Catalog.Apex, true
	}
	if isReverseZone(zone) {
		return c.Reverse, true
	}
	return Apex{}, false
}

func (c *ZoneConfig) encode() []byte {
	e := &enc{}
	e.U8(2)
	names := slices.Sorted(maps.Keys(c.Forward))
	e.U16(uint16(len(names)))
	for _, n := range names {
		e.Str16(n)
		a := c.Forward[n]
		a.encode(e)
	}
	c.Reverse.encode(e)
	if c.Catalog != nil {
		e.U8(1)
		e.Str16(c.Catalog.Name)
		c.Catalog.Apex.encode(e)
	} else {
		e.U8(0)
	}
	return e.B
}

func decodeZoneConfig(b []byte) (ZoneConfig, error) {
	d := &dec{B: b}
	version := d.U8()
	if d.Err == nil && version != 1 && version != 2 {
		return ZoneConfig{}, fmt.Errorf("zone config: unknown encoding version %d", version)
	}
	c := ZoneConfig{Forward: map[string]Apex{}}
	n := int(d.U16())
	for i := 0; i < n && d.Err == nil; i++ {
		name := d.Str16()
		c.Forward[name] = decodeApex(d)
	}
	c.Reverse = decodeApex(d)
	if version >= 2 && d.U8() == 1 { // version 1 had no catalog
		c.Catalog = &CatalogConfig{Name: d.Str16(), Apex: decodeApex(d)}
	}
	return c, d.Done("zone config")
}

// zoneMeta is the per-zone bookkeeping stored beside its names.
type zoneMeta struct {
	Serial     uint32
	LastChange time.Time
	Names      uint32 // owner names with records, apex excluded
	Records    uint32 // records at those names, apex excluded
	NextSeq    uint64 // journal key of the next entry
	JEntries   uint32 // journal entries held
	JBytes     uint64 // bytes of journal entries held
	Apex       Apex   // the apex served at Serial
}

func (m *zoneMeta) encode() []byte {
	e := &enc{}
	e.U8(1)
	e.U32(m.Serial)
	e.I64(m.LastChange.UnixNano())
	e.U32(m.Names)
	e.U32(m.Records)
	e.U64(m.NextSeq)
	e.U32(m.JEntries)
	e.U64(m.JBytes)
	m.Apex.encode(e)
	return e.B
}

func decodeZoneMeta(b []byte) (zoneMeta, error) {
	d := &dec{B: b}
	d.Version(1, "zone meta")
	m := zoneMeta{
		Serial:     d.U32(),
		LastChange: time.Unix(0, d.I64()).UTC(),
		Names:      d.U32(),
		Records:    d.U32(),
		NextSeq:    d.U64(),
		JEntries:   d.U32(),
		JBytes:     d.U64(),
	}
	m.Apex = decodeApex(d)
	return m, d.Done("zone meta")
}

// ZoneInfo describes one stored zone.
type ZoneInfo struct {
	Name       string // lower case, no trailing dot
	Reverse    bool
	Serial     uint32
	LastChange time.Time
	Names      int // owner names with records, apex excluded
	Records    int // records at those names, apex excluded
	Apex       Apex
	// Journal holds the serials an IXFR can start from: JournalFrom is the
	// oldest (0 when the journal is empty).
	JournalFrom    uint32
	JournalEntries int
	JournalBytes   int64
}

func (z ZoneInfo) String() string {
	return fmt.Sprintf("%s serial %d, %d names, %d records", z.Name, z.Serial, z.Names, z.Records)
}
