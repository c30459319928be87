package db

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/miekg/dns"
)

// RRs is the published record data of one owner name: resource records in
// wire format without their owner name (TYPE, CLASS, TTL, RDLENGTH, RDATA),
// sorted by type and RDATA. Names inside RDATA are uncompressed, so a
// record can be copied into any message as it is.
type RRs []byte

// rrFixed is the length of TYPE, CLASS, TTL and RDLENGTH.
const rrFixed = 10

// Each calls fn with every record of r. A truncated record ends the walk.
func (r RRs) Each(fn func(rr []byte)) {
	for len(r) >= rrFixed {
		n := rrFixed + int(binary.BigEndian.Uint16(r[8:10]))
		if n > len(r) {
			return
		}
		fn(r[:n])
		r = r[n:]
	}
}

// Count returns the number of records.
func (r RRs) Count() int {
	n := 0
	r.Each(func([]byte) { n++ })
	return n
}

// RRType returns the TYPE of one record of an RRs.
func RRType(rr []byte) uint16 { return binary.BigEndian.Uint16(rr[0:2]) }

// RRTTL returns the TTL of one record of an RRs.
func RRTTL(rr []byte) uint32 { return binary.BigEndian.Uint32(rr[4:8]) }

// RRData returns the RDATA of one record of an RRs.
func RRData(rr []byte) []byte { return rr[rrFixed:] }

// ToRR decodes the records of r, giving them owner (a presentation name).
func (r RRs) ToRR(owner string) ([]dns.RR, error) {
	w, err := wireName(owner)
	if err != nil {
		return nil, err
	}
	var out []dns.RR
	var firstErr error
	r.Each(func(rr []byte) {
		x, err := DecodeRR(w, rr)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		out = append(out, x)
	})
	return out, firstErr
}

// DecodeRR turns an owner wire name and one owner-less record into a dns.RR.
func DecodeRR(owner, rr []byte) (dns.RR, error) {
	if len(rr) < rrFixed {
		// A damaged journal entry: say so rather than read past it.
		return nil, fmt.Errorf("decode record of %s: %d bytes, shorter than a record", WireToString(owner), len(rr))
	}
	msg := make([]byte, 0, len(owner)+len(rr))
	msg = append(append(msg, owner...), rr...)
	x, _, err := dns.UnpackRR(msg, 0)
	if err != nil {
		return nil, fmt.Errorf("decode %s record of %s: %w", dns.TypeToString[RRType(rr)], WireToString(owner), err)
	}
	return x, nil
}

// EncodeRR packs rr without its owner name, with names in RDATA lower case
// and uncompressed.
func EncodeRR(rr dns.RR) ([]byte, error) {
	out, _, err := encodeRR(rr, nil)
	return out, err
}

// encodeRR is EncodeRR packing in buf (grown when too small, returned for
// the next call): only the result is allocated.
func encodeRR(rr dns.RR, buf []byte) ([]byte, []byte, error) {
	packed, buf, err := packRR(rr, buf)
	if err != nil {
		return nil, buf, err
	}
	off, err := skipName(packed, 0)
	if err != nil {
		return nil, buf, err
	}
	out := slices.Clone(packed[off:])
	lowerRDataNames(out)
	return out, buf, nil
}

// packRR packs rr uncompressed, owner name included, as dns.PackRR does,
// into buf (grown when too small); it returns the packed record, which is
// buf's, and buf for the next call.
func packRR(rr dns.RR, buf []byte) (packed, next []byte, err error) {
	if len(buf) < 512 {
		buf = make([]byte, 512)
	}
	for {
		end, err := dns.PackRR(rr, buf, 0, nil, false)
		if err == dns.ErrBuf && len(buf) < 1<<16 {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if err != nil {
			return nil, buf, fmt.Errorf("encode %s: %w", rr.Header().Name, err)
		}
		return buf[:end], buf, nil
	}
}

// skipName returns the offset just past the uncompressed wire name at off.
func skipName(b []byte, off int) (int, error) {
	for off < len(b) {
		l := int(b[off])
		if l == 0 {
			return off + 1, nil
		}
		if l&0xC0 != 0 {
			return 0, fmt.Errorf("compressed name where none was expected")
		}
		off += l + 1
	}
	return 0, fmt.Errorf("name runs past the end")
}

// lowerRDataNames lower-cases the domain names inside the RDATA of the types
// cns generates that carry names, so equal records compare equal.
func lowerRDataNames(rr []byte) {
	rd := rr[rrFixed:]
	switch RRType(rr) {
	case dns.TypeCNAME, dns.TypePTR, dns.TypeNS:
		lowerASCII(rd)
	case dns.TypeSRV:
		if len(rd) > 6 {
			lowerASCII(rd[6:])
		}
	}
}

// candidate is one VM's contribution of one record to a name. The
// published RRset of a name is derived from all its candidates.
type candidate struct {
	vm    [16]byte
	pref  uint8  // below candStamped
	stamp uint64 // see Record.Stamp
	rr    []byte
}

// candidate encoding: vm[16] pref[1] rr (TYPE CLASS TTL RDLENGTH RDATA),
// or, when the pref octet has candStamped set, vm[16] pref[1] stamp[8] rr.
// Stores written before stamps existed hold prefs 0 and 1 only, so they
// read unchanged.
const (
	candFixed   = 17
	candStamped = 0x80
)

func encodeCandidates(cs []candidate) []byte {
	n := 0
	for _, c := range cs {
		n += candFixed + len(c.rr)
		if c.stamp != 0 {
			n += 8
		}
	}
	out := make([]byte, 0, n)
	for _, c := range cs {
		out = append(out, c.vm[:]...)
		if c.stamp != 0 {
			out = append(out, c.pref|candStamped)
			out = binary.BigEndian.AppendUint64(out, c.stamp)
		} else {
			out = append(out, c.pref)
		}
		out = append(out, c.rr...)
	}
	return out
}

func decodeCandidates(b []byte) ([]candidate, error) {
	return appendCandidates(nil, b)
}

// appendCandidates is decodeCandidates into out's storage (a zone scan
// reuses one slice for every name).
func appendCandidates(out []candidate, b []byte) ([]candidate, error) {
	for len(b) > 0 {
		if len(b) < candFixed+rrFixed {
			return nil, fmt.Errorf("candidate record truncated (%d bytes left)", len(b))
		}
		var c candidate
		copy(c.vm[:], b[:16])
		c.pref = b[16]
		rest := b[candFixed:]
		if c.pref&candStamped != 0 {
			if len(rest) < 8+rrFixed {
				return nil, fmt.Errorf("stamped candidate record truncated (%d bytes left)", len(b))
			}
			c.pref &^= candStamped
			c.stamp = binary.BigEndian.Uint64(rest)
			rest = rest[8:]
		}
		n := rrFixed + int(binary.BigEndian.Uint16(rest[8:10]))
		if n > len(rest) {
			return nil, fmt.Errorf("candidate record data truncated")
		}
		c.rr = rest[:n:n]
		out = append(out, c)
		b = rest[n:]
	}
	return out, nil
}

// sortCandidates puts candidates in a canonical order so that equal sets
// encode to equal bytes.
func sortCandidates(cs []candidate) {
	slices.SortFunc(cs, func(a, b candidate) int {
		if c := bytes.Compare(a.vm[:], b.vm[:]); c != 0 {
			return c
		}
		return compareRR(a.rr, b.rr)
	})
}

// compareRR orders records by type, then RDATA, then TTL.
func compareRR(a, b []byte) int {
	if c := int(RRType(a)) - int(RRType(b)); c != 0 {
		return c
	}
	if c := bytes.Compare(RRData(a), RRData(b)); c != 0 {
		return c
	}
	return int(int64(RRTTL(a)) - int64(RRTTL(b)))
}

// publishPolicy turns the candidates of one name into what is served.
type publishPolicy struct {
	// maxRRset caps the records of one type at one name (0: no cap).
	maxRRset int
}

// publish derives the served RRs of a name from its candidates:
//   - identical records from several VMs are served once (lowest TTL);
//   - PTR and CNAME are singletons: the candidate with the lowest Pref, then
//     the shortest target, then the lexically smallest wins, so one address
//     has exactly one PTR whatever order VMs arrive in;
//   - so is any type with a stamped candidate (a _grpc_config TXT): the
//     lowest Pref, then the highest stamp (the newest), then as above;
//   - a CNAME next to other data is dropped (it would make the zone invalid);
//   - an RRset above the cap keeps its first maxRRset records in canonical
//     order, so every secondary accepts the zone and the cut is stable.
//
// It reports the RRsets it cut, as (type, kept, total) triples.
func (p publishPolicy) publish(cs []candidate) (RRs, []capped) {
	return p.publishWith(&publishScratch{}, cs)
}

// publishScratch is storage publishWith reuses from one name to the next;
// what it returns lives in it until the next call.
type publishScratch struct {
	sorted []*candidate
	out    []byte
}

func (p publishPolicy) publishWith(scratch *publishScratch, cs []candidate) (RRs, []capped) {
	switch len(cs) {
	case 0:
		return nil, nil
	case 1:
		// Most names (each VM's own) have one candidate: nothing to
		// order, merge or cap. A transfer sent from the store at 1M VMs
		// decodes 6M names, and sorting spent ~9 % of it.
		scratch.out = append(scratch.out[:0], cs[0].rr...)
		return scratch.out, nil
	}
	stamped := stampedTypes(cs)
	single := func(t uint16) bool { return singleton(t) || (stamped != nil && slices.Contains(stamped, t)) }
	// Sort pointers: candidates are large, and this runs for every name
	// a commit touches and a warm-up reads.
	sorted := scratch.sorted[:0]
	if cap(sorted) < len(cs) {
		sorted = make([]*candidate, 0, len(cs))
	}
	for i := range cs {
		sorted = append(sorted, &cs[i])
	}
	slices.SortFunc(sorted, func(a, b *candidate) int {
		ta, tb := RRType(a.rr), RRType(b.rr)
		if ta != tb {
			return int(ta) - int(tb)
		}
		if single(ta) {
			return compareSingleton(a, b)
		}
		return compareRR(a.rr, b.rr)
	})
	hasOther := false
	for _, c := range sorted {
		if RRType(c.rr) != dns.TypeCNAME {
			hasOther = true
			break
		}
	}
	out := scratch.out[:0]
	var cuts []capped
	var prev []byte
	kept, total := 0, 0
	flush := func(t uint16) {
		if total > kept {
			cuts = append(cuts, capped{Type: t, Kept: kept, Total: total})
		}
		kept, total = 0, 0
	}
	for i, c := range sorted {
		t := RRType(c.rr)
		if i > 0 && RRType(sorted[i-1].rr) != t {
			flush(RRType(sorted[i-1].rr))
			prev = nil
		}
		if t == dns.TypeCNAME && hasOther {
			continue
		}
		if prev != nil && bytes.Equal(RRData(prev), RRData(c.rr)) {
			continue // same record from another VM; the lowest TTL sorted first
		}
		if prev != nil && single(t) {
			continue
		}
		total++
		prev = c.rr
		if p.maxRRset > 0 && kept >= p.maxRRset {
			continue
		}
		kept++
		out = append(out, c.rr...)
	}
	if len(sorted) > 0 {
		flush(RRType(sorted[len(sorted)-1].rr))
	}
	clear(sorted) // no candidate kept alive by the scratch
	scratch.sorted, scratch.out = sorted[:0], out
	return out, cuts
}

// capped describes an RRset that publish cut to the cap.
type capped struct {
	Type        uint16
	Kept, Total int
}

func singleton(t uint16) bool { return t == dns.TypePTR || t == dns.TypeCNAME }

// compareSingleton orders the candidates of a singleton type, the one
// served first: lowest Pref, highest stamp, shortest, smallest.
func compareSingleton(a, b *candidate) int {
	if a.pref != b.pref {
		return int(a.pref) - int(b.pref)
	}
	if a.stamp != b.stamp {
		if a.stamp > b.stamp {
			return -1
		}
		return 1
	}
	if la, lb := len(a.rr), len(b.rr); la != lb {
		return la - lb
	}
	return compareRR(a.rr, b.rr)
}

// stampedTypes lists the types of cs with a stamped candidate, without
// allocating when there is none (the common case).
func stampedTypes(cs []candidate) []uint16 {
	var ts []uint16
	for _, c := range cs {
		if c.stamp != 0 && !slices.Contains(ts, RRType(c.rr)) {
			ts = append(ts, RRType(c.rr))
		}
	}
	return ts
}

// disagreement is a stamped singleton whose VMs offer different records.
type disagreement struct {
	Type   uint16
	VMs    int      // VMs with a stamped candidate of Type
	Values int      // distinct RDATA among them
	Winner [16]byte // the VM whose record is served
}

// disagreements reports the stamped singletons of one name whose VMs do
// not agree, so that the operator learns that one config won.
func disagreements(cs []candidate) []disagreement {
	var out []disagreement
	for _, t := range stampedTypes(cs) {
		var best *candidate
		var values [][]byte
		vms := map[[16]byte]bool{}
		for i := range cs {
			c := &cs[i]
			if RRType(c.rr) != t || c.stamp == 0 {
				continue
			}
			vms[c.vm] = true
			if !slices.ContainsFunc(values, func(v []byte) bool { return bytes.Equal(v, RRData(c.rr)) }) {
				values = append(values, RRData(c.rr))
			}
			if best == nil || compareSingleton(c, best) < 0 {
				best = c
			}
		}
		if len(values) > 1 {
			out = append(out, disagreement{Type: t, VMs: len(vms), Values: len(values), Winner: best.vm})
		}
	}
	return out
}

// diffRRs returns the records only in a and the records only in b. Both
// are in canonical order.
func diffRRs(a, b RRs) (onlyA, onlyB [][]byte) {
	var as, bs [][]byte
	a.Each(func(rr []byte) { as = append(as, rr) })
	b.Each(func(rr []byte) { bs = append(bs, rr) })
	i, j := 0, 0
	for i < len(as) && j < len(bs) {
		switch c := compareRR(as[i], bs[j]); {
		case c == 0 && bytes.Equal(as[i], bs[j]):
			i++
			j++
		case c < 0:
			onlyA = append(onlyA, as[i])
			i++
		case c > 0:
			onlyB = append(onlyB, bs[j])
			j++
		default: // same type and data, other TTL or class
			onlyA = append(onlyA, as[i])
			onlyB = append(onlyB, bs[j])
			i++
			j++
		}
	}
	onlyA = append(onlyA, as[i:]...)
	onlyB = append(onlyB, bs[j:]...)
	return onlyA, onlyB
}
