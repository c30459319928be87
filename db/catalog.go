package db

import (
	"crypto/sha1"
	"encoding/hex"
	"maps"
	"slices"

	"github.com/miekg/dns"
)

// CatalogConfig asks the store to maintain an RFC 9432 catalog zone that
// lists every other zone, so secondaries that consume catalogs (BIND 9.18,
// Knot 3.2) provision new reverse zones by themselves.
type CatalogConfig struct {
	Name string // lower case, no trailing dot
	Apex Apex   // RFC 9432 suggests NS "invalid."
}

// catalogVM is the contributor of the records the store generates itself;
// no VM entry lists it.
var catalogVM [16]byte

// updateCatalog brings the catalog zone's member list in line with the
// zones that exist once this commit lands, in the same transaction.
func (c *commit) updateCatalog() error {
	cat := c.cfg.Catalog
	z, err := c.zone(cat.Name)
	if err != nil || z == nil {
		return err
	}
	// The zones that will exist: the stored ones and the ones this commit
	// touches, less those it removes.
	members := map[string]bool{}
	err = c.tx.Bucket(bucketZones).ForEachBucket(func(k []byte) error {
		members[string(k)] = true
		return nil
	})
	if err != nil {
		return err
	}
	for name, zw := range c.zones {
		switch c.fate(zw) {
		case zoneRemoved:
			delete(members, name)
		case zoneChanged:
			members[name] = true
		}
	}
	delete(members, cat.Name)

	want := map[string][]candidate{}
	add := func(owner string, rr dns.RR) error {
		b, err := EncodeRR(rr)
		if err != nil {
			return err
		}
		want[owner] = append(want[owner], candidate{vm: catalogVM, pref: 1, rr: b})
		return nil
	}
	origin := dns.Fqdn(cat.Name)
	if err := add("version."+origin, &dns.TXT{Hdr: dns.RR_Header{Name: "version." + origin, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{"2"}}); err != nil {
		return err
	}
	for _, m := range slices.Sorted(maps.Keys(members)) {
		owner := catalogMemberID(m) + ".zones." + origin
		if err := add(owner, &dns.PTR{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypePTR, Class: dns.ClassINET}, Ptr: dns.Fqdn(m)}); err != nil {
			return err
		}
	}
	// Names to rewrite: the ones wanted and the ones stored.
	keys := map[string][]byte{}
	for owner := range want {
		w, err := wireName(owner)
		if err != nil {
			return err
		}
		k, _ := relativeKey(w, z.wire)
		keys[string(k)] = w
	}
	if z.bucket != nil {
		err := z.bucket.Bucket(bucketNames).ForEach(func(k, _ []byte) error {
			if _, ok := keys[string(k)]; !ok {
				keys[string(k)] = keyToWire(k, z.wire)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for k, w := range keys {
		nw, err := c.name(z, []byte(k), w)
		if err != nil {
			return err
		}
		nw.cands = slices.Clone(want[WireToString(w)])
		nw.done = false
	}
	return nil
}

// catalogMemberID is the member label of a zone: the SHA-1 of its wire
// name in hex, as BIND names catalog members.
func catalogMemberID(zone string) string {
	w, _ := ZoneWire(zone)
	sum := sha1.Sum(w)
	return hex.EncodeToString(sum[:])
}
