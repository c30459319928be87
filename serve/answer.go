package serve

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/miekg/dns"
)

// Size limits of answers.
const (
	minUDPSize  = 512
	maxTCPSize  = 65535
	optLen      = 11 // an OPT record without options
	maxCNAMEs   = 8  // CNAME hops followed inside a zone
	maxPointer  = 0x3FFF
	rcodeBadVer = 16
	edeHeader   = 6 // option code, length and INFO-CODE of an EDE option
)

// Extended DNS Errors (RFC 8914) of client-scoped answers: "Other Error"
// with a text, since no registered code says "who are you".
const (
	edeOther           = 0
	edeUnknownSource   = "client_answers: the source address identifies no instance"
	edeAmbiguousSource = "client_answers: the source address belongs to several instances"
	edeNotInZone       = "client_answers: the asking instance has no names in this zone"
)

// response builds one answer message in place. The header is written last,
// when the counts are known.
type response struct {
	b      []byte
	limit  int // size the message must fit, OPT included
	flags  uint16
	rcode  int
	an     uint16
	ns     uint16
	ar     uint16
	qend   int // end of the question section
	edns   bool
	ednsDO bool
	size   uint16 // our EDNS UDP payload size
	// ede, when edeText is set, is the Extended DNS Error (RFC 8914) the
	// OPT record carries.
	ede     uint16
	edeText string
}

// start copies the question of q into b and prepares the header fields.
func (r *response) start(q *query, b []byte, limit int, udpSize uint16) {
	*r = response{b: b[:0], limit: limit, size: udpSize}
	r.b = append(r.b, make([]byte, headerLen)...)
	if q.qend > 0 {
		r.b = append(r.b, q.msg[headerLen:q.qend]...)
	}
	r.qend = len(r.b)
	r.flags = flagQR | q.flags&(opcodeMask|flagRD|flagCD)
	r.edns = q.edns
	r.ednsDO = q.ednsDO
	if r.edns {
		r.limit -= optLen
	}
}

// appendRRs appends every record of rrs (db.RRs form) with the owner name
// given as a compression pointer to ptr. It returns false, having
// appended nothing, when they do not all fit.
func (r *response) appendRRs(rrs []byte, ptr int, count *uint16) bool {
	_, ok := r.appendType(rrs, 0, ptr, count)
	return ok
}

// appendType appends the records of type t in rrs (db.RRs form, sorted by
// type; t 0: every record) as appendRRs does, in the one walk that finds
// them, and returns how many it appended.
func (r *response) appendType(rrs []byte, t uint16, ptr int, count *uint16) (n uint16, ok bool) {
	start := len(r.b)
	p0, p1 := byte(0xC0|ptr>>8), byte(ptr)
	for off := 0; off+10 <= len(rrs); {
		rt := binary.BigEndian.Uint16(rrs[off:])
		l := 10 + int(binary.BigEndian.Uint16(rrs[off+8:]))
		if rt != t && t != 0 {
			if n > 0 || rt > t {
				break // past the run
			}
			off += l
			continue
		}
		if len(r.b)+2+l > r.limit {
			r.b = r.b[:start]
			return 0, false
		}
		r.b = append(r.b, p0, p1)
		r.b = append(r.b, rrs[off:off+l]...)
		n++
		off += l
	}
	*count += n
	return n, true
}

// truncate drops everything after the question and sets TC.
func (r *response) truncate() {
	r.b = r.b[:r.qend]
	r.an, r.ns, r.ar = 0, 0, 0
	r.flags |= flagTC
}

// finish writes the header and the OPT record and returns the message.
func (r *response) finish(id uint16) []byte {
	if r.edns {
		ext := uint32(r.rcode>>4) << 24
		if r.ednsDO {
			ext |= 0x8000
		}
		r.b = append(r.b, 0, byte(dns.TypeOPT>>8), byte(dns.TypeOPT),
			byte(r.size>>8), byte(r.size),
			byte(ext>>24), byte(ext>>16), byte(ext>>8), byte(ext), 0, 0)
		if r.edeText != "" {
			r.appendEDE()
		}
		r.ar++
	}
	h := r.b[:headerLen]
	binary.BigEndian.PutUint16(h[0:], id)
	binary.BigEndian.PutUint16(h[2:], r.flags|uint16(r.rcode&0xF))
	qd := uint16(0)
	if r.qend > headerLen {
		qd = 1
	}
	binary.BigEndian.PutUint16(h[4:], qd)
	binary.BigEndian.PutUint16(h[6:], r.an)
	binary.BigEndian.PutUint16(h[8:], r.ns)
	binary.BigEndian.PutUint16(h[10:], r.ar)
	return r.b
}

// appendEDE adds the Extended DNS Error option to the OPT record just
// written (room for it was not reserved: it is left out when it does not
// fit).
func (r *response) appendEDE() {
	n := edeHeader + len(r.edeText)
	if len(r.b)+n > r.limit+optLen {
		return
	}
	binary.BigEndian.PutUint16(r.b[len(r.b)-2:], uint16(n))
	r.b = binary.BigEndian.AppendUint16(r.b, dns.EDNS0EDE)
	r.b = binary.BigEndian.AppendUint16(r.b, uint16(2+len(r.edeText)))
	r.b = binary.BigEndian.AppendUint16(r.b, r.ede)
	r.b = append(r.b, r.edeText...)
}

// answer resolves a parsed QUERY against the snapshot into b.
func (s *Server) answer(sn *snapshot, q *query, b []byte, limit int) []byte {
	var r response
	r.start(q, b, limit, s.udpSize)
	if s.answerOutsideZones(&r, q) {
		return r.finish(q.id)
	}
	name := q.lower()
	z, zoff := sn.findZone(name)
	if z == nil {
		if s.fwd.eligible(q) {
			q.forward = true
			return nil
		}
		r.rcode = dns.RcodeRefused
		return r.finish(q.id)
	}
	if q.qclass == dns.ClassINET {
		// QCLASS ANY (*) gets the IN data, never authoritatively (RFC 6895
		// §3.3.2), as NSD answers it.
		r.flags |= flagAA
	}
	if zoff == 0 && q.qtype == dns.TypeSOA {
		s.peers.soaQuery(q.src.Addr(), z.name)
	}
	zonePtr := headerLen + zoff // the apex inside the question name
	ptr := headerLen            // owner of the next answer records
	// scoped is set once name is the client-scoped meaning of the question
	// (client answers on, so sn.clients is set; client-only listeners
	// exist only then): an owner-less name that cannot exist as asked, or
	// any name on a client-only listener, gets it before any lookup;
	// another name only when it does not exist.
	scoped := false
	if sn.clients != nil && (q.clientOnly() || z.ownerlessOnly(name, zoff)) {
		var ok bool
		if name, ok = s.scopedMeaning(&r, sn, z, q, name, zoff); !ok {
			return r.finish(q.id)
		}
		scoped = true
	}
	for hop := 0; ; hop++ {
		rrs, found, err := z.node(name)
		if err != nil {
			return s.lookupFailed(&r, z, q, err)
		}
		if !found {
			if hop == 0 && !scoped && sn.clients != nil {
				var ok bool
				if name, ok = s.scopedMeaning(&r, sn, z, q, name, zoff); !ok {
					break
				}
				scoped = true
				continue
			}
			r.rcode = dns.RcodeNameError
			s.negative(&r, z, zonePtr)
			break
		}
		rtype := q.qtype
		if q.qtype == dns.TypeANY && len(rrs) > 0 {
			// RFC 8482: one RRset is a complete answer to ANY.
			rtype = binary.BigEndian.Uint16(rrs)
		}
		start := len(r.b)
		n, ok := r.appendType(rrs, rtype, ptr, &r.an)
		if !ok {
			r.truncate()
			break
		}
		if n > 0 {
			if rtype == dns.TypeSRV { // asked for, or the RRset given to ANY
				s.srvAdditionals(&r, z, start)
			}
			break
		}
		cname, cn := rrsOfType(rrs, dns.TypeCNAME)
		if cn == 0 || q.qtype == dns.TypeCNAME || hop == maxCNAMEs {
			s.negative(&r, z, zonePtr) // NODATA
			break
		}
		// Follow the CNAME inside the zone (RFC 1034 §4.3.2, RFC 6604).
		rdOff := len(r.b) + 2 + 10
		if !r.appendRRs(cname, ptr, &r.an) {
			r.truncate()
			break
		}
		target := r.b[rdOff:]
		if !z.contains(target) || rdOff > maxPointer {
			break
		}
		name, ptr = target, rdOff
	}
	return r.finish(q.id)
}

// lookupFailed answers SERVFAIL, without any record, to a query whose
// lookup in the store failed (a cold zone read from a damaged db).
func (s *Server) lookupFailed(r *response, z *zone, q *query, err error) []byte {
	s.log.Error("lookup failed", "zone", z.name, "err", err)
	r.b = r.b[:r.qend]
	r.an = 0
	r.flags &^= flagAA
	r.rcode = dns.RcodeServerFailure
	return r.finish(q.id)
}

// ownerlessOnly reports whether name can only mean its scoped meaning:
// it has an owner-less form, and the zone, in memory, has no name of that
// shape (neither svc.<zone> nor inst.<zone> exists). Such names skip the
// lookup that could only fail.
func (z *zone) ownerlessOnly(name []byte, zoff int) bool {
	if z.names == nil || z.kindNodes {
		return false
	}
	_, ok := ownerless(name, zoff)
	return ok
}

// scopedMeaning returns the name an owner-less name means in the scope
// of the instance the query comes from (see clients.go). Otherwise it
// writes the answer into r and returns false: NXDOMAIN for a name with
// no owner-less form (REFUSED on a client-only listener, which offers
// nothing else), and NXDOMAIN with an Extended DNS Error saying why for a
// caller identified as no one, or as several instances, or asking in a
// zone its instance has no names in: never another owner's records.
func (s *Server) scopedMeaning(r *response, sn *snapshot, z *zone, q *query, name []byte, zoff int) ([]byte, bool) {
	kindOff, ok := ownerless(name, zoff)
	switch {
	case !ok && q.clientOnly(), sn.clients == nil:
		r.flags &^= flagAA
		r.rcode = dns.RcodeRefused
		return nil, false
	case !ok:
		r.rcode = dns.RcodeNameError
		s.negative(r, z, headerLen+zoff)
		return nil, false
	}
	cl, status := sn.clients.caller(q.src.Addr(), q.local())
	switch {
	case status == callerUnknown:
		q.scope, r.ede, r.edeText = scopeUnidentified, edeOther, edeUnknownSource
	case status == callerAmbiguous:
		q.scope, r.ede, r.edeText = scopeUnidentified, edeOther, edeAmbiguousSource
	case !slices.Contains(cl.scope.zones, z.name):
		// The caller's scope covers the zones its instance has names in.
		r.ede, r.edeText = edeOther, edeNotInZone
	default:
		if q.conn == nil {
			q.conn = &queryConn{} // tests; a listener's queries come with one
		}
		if scoped, ok := scopedName(&q.conn.scratch, name, kindOff, zoff, &cl); ok {
			q.scope = scopeAnswered
			return scoped, true
		}
	}
	r.rcode = dns.RcodeNameError
	s.negative(r, z, headerLen+zoff)
	return nil, false
}

// negative adds the zone's SOA to the authority section.
func (s *Server) negative(r *response, z *zone, zonePtr int) {
	if !r.appendRRs(z.negSOA, zonePtr, &r.ns) {
		r.truncate()
	}
}

// srvAdditionals adds the addresses of in-zone SRV targets to the
// additional section, as many as fit: they save the client a lookup but
// are never worth a truncation.
func (s *Server) srvAdditionals(r *response, z *zone, start int) {
	end := len(r.b)
	var seenBuf [32][]byte // on the stack: an answer allocates nothing
	seen := seenBuf[:0]
	for off := start; off+12 <= end; {
		l := 12 + int(binary.BigEndian.Uint16(r.b[off+10:]))
		tOff := off + 12 + 6
		off += l
		if binary.BigEndian.Uint16(r.b[off-l+2:]) != dns.TypeSRV || tOff >= off || tOff > maxPointer {
			continue
		}
		target := r.b[tOff:off]
		dup := false
		for _, t := range seen {
			if bytes.Equal(t, target) {
				dup = true
				break
			}
		}
		if dup || !z.contains(target) {
			continue
		}
		seen = append(seen, target)
		rrs, found, err := z.node(target)
		if err != nil || !found {
			continue
		}
		for _, t := range [2]uint16{dns.TypeA, dns.TypeAAAA} {
			if _, ok := r.appendType(rrs, t, tOff, &r.ar); !ok {
				return
			}
		}
	}
}

// answerOutsideZones answers what no zone holds: the meta names, the
// CHAOS class, and any class but IN and ANY (REFUSED). It reports whether
// it answered.
func (s *Server) answerOutsideZones(r *response, q *query) bool {
	switch {
	case s.metaVersion != "" && !q.clientOnly() && underMeta(q.lower()):
		s.answerMeta(r, q)
	case q.qclass == dns.ClassCHAOS && !q.clientOnly():
		s.answerChaos(r, q)
	case q.qclass != dns.ClassINET && q.qclass != dns.ClassANY:
		r.rcode = dns.RcodeRefused
	default:
		return false
	}
	return true
}

// answerChaos answers the CHAOS-class identity queries operators use:
// version.bind / version.server and id.server / hostname.bind.
func (s *Server) answerChaos(r *response, q *query) {
	var txt string
	switch string(q.lower()) {
	case "\x07version\x04bind\x00", "\x07version\x06server\x00":
		txt = s.version
	case "\x02id\x06server\x00", "\x08hostname\x04bind\x00":
		txt = s.identity
	}
	if txt == "" || (q.qtype != dns.TypeTXT && q.qtype != dns.TypeANY) {
		r.rcode = dns.RcodeRefused
		return
	}
	r.flags |= flagAA
	if !r.appendRRs(txtRR(dns.ClassCHAOS, 0, txt), headerLen, &r.an) {
		r.truncate()
	}
}

// The reference's meta names: version._cns_meta (any class) answers the
// version as TXT, for its own peer version probe (and cns's); any other
// name under _cns_meta does not exist. Hidden with the version.
var (
	metaSuffix      = []byte("\x09_cns_meta\x00")
	metaVersionName = "\x07version\x09_cns_meta\x00"
)

// underMeta reports whether a wire name (lower case) ends in the label
// _cns_meta: a cheap test of the last bytes first, for every query.
func underMeta(name []byte) bool {
	if !bytes.HasSuffix(name, metaSuffix) {
		return false
	}
	for off := 0; off < len(name) && name[off] != 0; off += 1 + int(name[off]) {
		if len(name)-off == len(metaSuffix) {
			return true
		}
	}
	return false
}

// metaTTL is the reference's: its TTL 0 goes out as mname's default, 5.
const metaTTL = 5

// answerMeta answers a name under _cns_meta: the version TXT (to a TXT or
// ANY query; other types get no data), NXDOMAIN for any other name.
func (s *Server) answerMeta(r *response, q *query) {
	r.flags |= flagAA
	if string(q.lower()) != metaVersionName {
		r.rcode = dns.RcodeNameError
		return
	}
	if q.qtype != dns.TypeTXT && q.qtype != dns.TypeANY {
		return
	}
	class := q.qclass
	if class == dns.ClassANY {
		class = dns.ClassINET
	}
	if !r.appendRRs(txtRR(class, metaTTL, s.metaVersion), headerLen, &r.an) {
		r.truncate()
	}
}

// txtRR is a one-string TXT record without its owner (appendRRs adds it),
// txt cut at 255 bytes.
func txtRR(class uint16, ttl uint32, txt string) []byte {
	if len(txt) > 255 {
		txt = txt[:255]
	}
	rr := []byte{0, byte(dns.TypeTXT), byte(class >> 8), byte(class), byte(ttl >> 24), byte(ttl >> 16), byte(ttl >> 8), byte(ttl), 0, byte(len(txt) + 1), byte(len(txt))}
	return append(rr, txt...)
}

// errorReply answers a request that cannot be answered normally with
// rcode, echoing what could be parsed of it.
func (s *Server) errorReply(q *query, b []byte, rcode int) []byte {
	var r response
	r.start(q, b, maxTCPSize, s.udpSize)
	r.rcode = rcode
	return r.finish(q.id)
}
