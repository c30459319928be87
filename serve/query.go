package serve

import (
	"encoding/binary"
	"net/netip"

	"github.com/miekg/dns"
)

// DNS header flag bits and codes used on the hot path.
const (
	headerLen = 12

	flagQR = 1 << 15
	flagAA = 1 << 10
	flagTC = 1 << 9
	flagRD = 1 << 8
	flagCD = 1 << 4

	opcodeMask  = 0x7800
	opcodeShift = 11

	maxNameLen = 255
)

// query is a parsed request. Parsing never allocates: names are slices of
// the packet or of the fixed buffer.
type query struct {
	msg    []byte // the whole request
	id     uint16
	flags  uint16
	opcode uint8
	qname  []byte // the question name as received (original case)
	qend   int    // offset just past the question section
	qtype  uint16
	qclass uint16
	lname  [maxNameLen + 1]byte // qname in lower case (and a byte for lowerASCII's last word)
	lnameN int

	// EDNS
	edns        bool
	ednsSize    uint16
	ednsVersion uint8
	ednsDO      bool

	// IXFR: the client's serial from the authority SOA.
	ixfrSerial uint32
	hasIXFRSOA bool
	// signed is set when the request carries a TSIG record, which only the
	// slow path (miekg/dns) verifies.
	signed bool

	tcp bool
	src netip.AddrPort // the client
	// conn is where the query came in (nil: an ordinary listener, as in
	// tests); it is kept across parse.
	conn *queryConn
	// scope says how client answers went, for the counters.
	scope scopeOutcome

	// forward is set when the query is for no zone of cns and may go to
	// the forwarding resolvers: the caller answers it, not answer().
	forward bool
}

// scopeOutcome is what client_answers made of a query.
type scopeOutcome uint8

const (
	scopeNone         scopeOutcome = iota // not an owner-less name
	scopeAnswered                         // answered in the caller's scope
	scopeUnidentified                     // owner-less, but the caller is no one (or several)
)

// queryConn is what one socket's (or TCP connection's) queries share:
// the listener they reached, and room for an owner-less name's scoped
// meaning, so that answering it allocates nothing.
type queryConn struct {
	endpoint
	scratch [maxNameLen]byte
}

// clientOnly reports whether the query reached a client_answers listener.
func (q *query) clientOnly() bool { return q.conn != nil && q.conn.clientOnly }

// local is the address the query reached cns at (invalid when unknown).
func (q *query) local() netip.Addr {
	if q.conn == nil {
		return netip.Addr{}
	}
	return q.conn.local
}

func (q *query) lower() []byte { return q.lname[:q.lnameN] }

// parseResult says what to do with a request.
type parseResult int

const (
	parseOK      parseResult = iota
	parseDrop                // not worth an answer (too short, or a response)
	parseFormErr             // answer FORMERR
	parseNotImp              // answer NOTIMP (unknown opcode)
	parseBadVers             // answer BADVERS (EDNS version > 0)
)

// parse reads msg into q. A parseFormErr or parseNotImp result still fills
// what it could (ID, flags, question when readable) so the error reply can
// echo them.
func (q *query) parse(msg []byte) parseResult {
	*q = query{msg: msg, tcp: q.tcp, src: q.src, conn: q.conn}
	if len(msg) < headerLen {
		return parseDrop
	}
	q.id = binary.BigEndian.Uint16(msg[0:])
	q.flags = binary.BigEndian.Uint16(msg[2:])
	if q.flags&flagQR != 0 {
		return parseDrop // never answer a response
	}
	q.opcode = uint8((q.flags & opcodeMask) >> opcodeShift)
	qd := binary.BigEndian.Uint16(msg[4:])
	an := binary.BigEndian.Uint16(msg[6:])
	ns := binary.BigEndian.Uint16(msg[8:])
	ar := binary.BigEndian.Uint16(msg[10:])
	if qd != 1 {
		if q.opcode != dns.OpcodeQuery && q.opcode != dns.OpcodeNotify {
			return parseNotImp
		}
		return parseFormErr
	}
	off, ok := q.parseName(headerLen)
	if !ok || off+4 > len(msg) {
		return parseFormErr
	}
	q.qtype = binary.BigEndian.Uint16(msg[off:])
	q.qclass = binary.BigEndian.Uint16(msg[off+2:])
	q.qend = off + 4
	if q.opcode != dns.OpcodeQuery {
		return parseNotImp // the caller special-cases NOTIFY
	}
	if an != 0 {
		return parseFormErr
	}
	// The authority section: only IXFR carries one (the client's SOA).
	off = q.qend
	for i := 0; i < int(ns); i++ {
		var rt uint16
		var rdOff int
		if off, rt, rdOff, ok = skipRR(msg, off); !ok {
			return parseFormErr
		}
		if rt == dns.TypeSOA && q.qtype == dns.TypeIXFR && !q.hasIXFRSOA {
			if s, ok := soaSerial(msg, rdOff, off); ok {
				q.ixfrSerial, q.hasIXFRSOA = s, true
			}
		}
	}
	// The additional section: at most one OPT, and a TSIG last.
	for i := 0; i < int(ar); i++ {
		start := off
		nameEnd, ok := skipName(msg, off)
		if !ok || nameEnd+10 > len(msg) {
			return parseFormErr
		}
		rt := binary.BigEndian.Uint16(msg[nameEnd:])
		if off, _, _, ok = skipRR(msg, start); !ok {
			return parseFormErr
		}
		switch rt {
		case dns.TypeOPT:
			if q.edns || nameEnd != start+1 { // second OPT, or not at the root
				return parseFormErr
			}
			q.edns = true
			q.ednsSize = binary.BigEndian.Uint16(msg[nameEnd+2:])
			ttl := binary.BigEndian.Uint32(msg[nameEnd+4:])
			q.ednsVersion = uint8(ttl >> 16)
			q.ednsDO = ttl&0x8000 != 0
		case dns.TypeTSIG:
			if i != int(ar)-1 {
				return parseFormErr
			}
			q.signed = true
		}
	}
	if q.edns && q.ednsVersion > 0 {
		return parseBadVers
	}
	return parseOK
}

// parseName reads the question name at off into q.qname and q.lname.
// Compression pointers are refused: a question has nothing to point to.
func (q *query) parseName(off int) (int, bool) {
	msg := q.msg
	start := off
	for {
		if off >= len(msg) {
			return 0, false
		}
		l := int(msg[off])
		if l&0xC0 != 0 {
			return 0, false
		}
		off += l + 1
		if off-start > maxNameLen {
			return 0, false
		}
		if l == 0 {
			break
		}
	}
	q.qname = msg[start:off]
	q.lnameN = copy(q.lname[:], q.qname)
	lowerASCII(&q.lname, q.lnameN)
	return off, true
}

// lowerASCII lower-cases the ASCII letters of b[:n] in place, eight bytes
// at a time (the word that holds b[n-1] is done whole; the bytes past n are
// scratch): in each byte below 0x80, adding 0x3f sets the top bit from 'A'
// up and adding 0x25 from 'Z'+1 up, so the bytes with the first and not
// the second are the capitals, and their top bit shifted down two is
// 0x20. Label lengths (0-63) and bytes from 0x80 are left alone.
func lowerASCII(b *[maxNameLen + 1]byte, n int) {
	const (
		low7 = 0x7f7f7f7f7f7f7f7f
		top  = 0x8080808080808080
	)
	for i := 0; i < n && i <= len(b)-8; i += 8 {
		w := binary.LittleEndian.Uint64(b[i : i+8])
		h := w & low7
		upper := (h + 0x3f3f3f3f3f3f3f3f) &^ (h + 0x2525252525252525) &^ w & top
		binary.LittleEndian.PutUint64(b[i:i+8], w|upper>>2)
	}
}

// skipName returns the offset past the (possibly compressed) name at off.
func skipName(msg []byte, off int) (int, bool) {
	for {
		if off >= len(msg) {
			return 0, false
		}
		l := int(msg[off])
		switch {
		case l == 0:
			return off + 1, true
		case l&0xC0 == 0xC0:
			if off+2 > len(msg) {
				return 0, false
			}
			return off + 2, true
		case l&0xC0 != 0:
			return 0, false
		}
		off += l + 1
	}
}

// skipRR returns the offset past the record at off, its type and where
// its RDATA starts.
func skipRR(msg []byte, off int) (end int, rtype uint16, rdOff int, ok bool) {
	off, ok = skipName(msg, off)
	if !ok || off+10 > len(msg) {
		return 0, 0, 0, false
	}
	rtype = binary.BigEndian.Uint16(msg[off:])
	rdOff = off + 10
	end = rdOff + int(binary.BigEndian.Uint16(msg[off+8:]))
	if end > len(msg) {
		return 0, 0, 0, false
	}
	return end, rtype, rdOff, true
}

// soaSerial reads the serial from the SOA RDATA at msg[rdOff:rdEnd] (two
// possibly compressed names, then the serial).
func soaSerial(msg []byte, rdOff, rdEnd int) (uint32, bool) {
	off, ok := skipName(msg, rdOff)
	if !ok {
		return 0, false
	}
	if off, ok = skipName(msg, off); !ok || off+4 > rdEnd {
		return 0, false
	}
	return binary.BigEndian.Uint32(msg[off:]), true
}
