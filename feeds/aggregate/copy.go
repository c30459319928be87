package aggregate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

// names is a source zone's copy: owner name (fqdn, lower case) → its
// records, encoded as the store encodes an RRset (db.RRs). The apex SOA
// is kept in the source's state instead.
type names map[string][]byte

// applyFull returns the names a full transfer changes (nil: removed).
func (c names) applyFull(next names) map[string][]byte {
	changed := map[string][]byte{}
	for n, v := range next {
		if !bytes.Equal(c[n], v) {
			changed[n] = v
		}
	}
	for n := range c {
		if _, ok := next[n]; !ok {
			changed[n] = nil
		}
	}
	return changed
}

// applyDiffs returns the names a sequence of IXFR differences changes,
// without touching c (a bad transfer leaves the copy as it was).
func (c names) applyDiffs(diffs []diff) (map[string][]byte, error) {
	work := names{}
	get := func(n string) []byte {
		if v, ok := work[n]; ok {
			return v
		}
		return c[n]
	}
	for _, d := range diffs {
		for _, rr := range d.del {
			n := strings.ToLower(rr.Header().Name)
			enc, err := db.EncodeRR(rr)
			if err != nil {
				return nil, err
			}
			work[n] = without(get(n), enc)
		}
		for _, rr := range d.add {
			n := strings.ToLower(rr.Header().Name)
			enc, err := db.EncodeRR(rr)
			if err != nil {
				return nil, err
			}
			work[n] = append(without(get(n), enc), enc...)
		}
	}
	for n, v := range work {
		if len(v) == 0 {
			work[n] = nil
		}
	}
	return work, nil
}

// apply stores changed names into c.
func (c names) apply(changed map[string][]byte) {
	for n, v := range changed {
		if v == nil {
			delete(c, n)
		} else {
			c[n] = v
		}
	}
}

func (c names) add(rr dns.RR) error {
	enc, err := db.EncodeRR(rr)
	if err != nil {
		return err
	}
	n := strings.ToLower(rr.Header().Name)
	c[n] = append(without(c[n], enc), enc...)
	return nil
}

// without returns set minus the record equal to one (type and RDATA; the
// TTL may differ), as a new slice.
func without(set, one []byte) []byte {
	out := make([]byte, 0, len(set)+len(one))
	db.RRs(set).Each(func(rr []byte) {
		if db.RRType(rr) != db.RRType(one) || !bytes.Equal(db.RRData(rr), db.RRData(one)) {
			out = append(out, rr...)
		}
	})
	return out
}

// rename is the suffix change of one region source: names below the
// source zone get the region's suffix instead.
type rename struct {
	region, source string // fqdn, lower case
}

func (r rename) name(n string) (string, bool) {
	if !dns.IsSubDomain(r.source, n) {
		return n, true // outside the source (an SRV target elsewhere): kept
	}
	out := strings.TrimSuffix(strings.ToLower(n), r.source) + r.region
	if _, ok := dns.IsDomainName(out); !ok || len(out) > 254 {
		return "", false
	}
	w := make([]byte, 256)
	if _, err := dns.PackDomainName(out, w, 0, nil, false); err != nil {
		return "", false
	}
	return out, true
}

// records are the region records of one source name (its apex SOA and NS
// are the source's own business: the region has the aggregator's). ok is
// false when a name would be too long after the suffix change.
func (r rename) records(owner string, v []byte) (recs []dns.RR, ok bool, err error) {
	apex := owner == r.source
	newOwner, ok := r.name(owner)
	if !ok {
		return nil, false, nil
	}
	rrs, err := db.RRs(v).ToRR(owner)
	if err != nil {
		return nil, true, err
	}
	for _, rr := range rrs {
		t := rr.Header().Rrtype
		if t == dns.TypeSOA || (apex && t == dns.TypeNS) {
			continue
		}
		rr.Header().Name = newOwner
		switch x := rr.(type) {
		case *dns.CNAME:
			x.Target, ok = r.name(x.Target)
		case *dns.SRV:
			x.Target, ok = r.name(x.Target)
		case *dns.PTR:
			x.Ptr, ok = r.name(x.Ptr)
		case *dns.MX:
			x.Mx, ok = r.name(x.Mx)
		case *dns.NS:
			x.Ns, ok = r.name(x.Ns)
		case *dns.DNAME:
			x.Target, ok = r.name(x.Target)
		}
		if !ok {
			return nil, false, nil
		}
		recs = append(recs, rr)
	}
	return recs, true, nil
}

// pseudoUUID names the pseudo-VM that carries one source name's records
// in the region zone: stable across restarts, UUID version 8 (see
// feeds.ExternalUUID).
func pseudoUUID(source, owner string) string {
	h := sha256.Sum256([]byte("cns aggregate\x00" + source + "\x00" + owner))
	h[6] = h[6]&0x0f | 0x80
	h[8] = h[8]&0x3f | 0x80
	s := hex.EncodeToString(h[:16])
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}

// pseudoMeta is what `cnsadm vm` shows of a pseudo-VM (the shape of
// feeds.VMMeta, so the existing readers show it): the source name as its
// alias, and where it comes from.
func pseudoMeta(uuid, source, owner string) []byte {
	b, _ := json.Marshal(struct {
		UUID    string   `json:"uuid"`
		Alias   string   `json:"alias"`
		State   string   `json:"state"`
		Reasons []string `json:"reasons"`
	}{uuid, owner, "aggregated", []string{"aggregated from " + source}})
	return b
}
