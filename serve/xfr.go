package serve

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

// Transfer message sizing: a message ends where a compression pointer can
// still reach (14 bits of offset), so every name in it can be pointed at.
// Larger messages compress worse: at 100k VMs 45 MB in 60 KB messages,
// 33 MB in 16 KB ones (BenchmarkAXFR's wire-bytes); the 12-byte header
// per message costs nothing next to that. Room is left for a TSIG record.
//
// Messages are written to the connection in batches of xfrWriteBatch
// bytes, each encoded in place after its length: one write and no copy
// per 256 KB instead of two writes and a copy through the connection's
// buffer per message (1M VMs: 17k messages; the kernel's share of a
// transfer fell by about half).
const (
	xfrMessageLimit = maxPointer + 1
	tsigRoom        = 256
	xfrWriteTimeout = 30 * time.Second
	xfrWriteBatch   = 256 << 10
)

// xfrWriter encodes the records of a transfer into messages and writes
// each, length-prefixed, as soon as it is full. Every name, owners and the
// names in NS, CNAME, PTR, MX and SOA RDATA, is compressed against all the
// names already in the same message (nameDict). It never touches the
// store: it is fed from the in-memory snapshot or a journal already read.
type xfrWriter struct {
	w     io.Writer
	q     *query
	zone  []byte // apex, wire
	limit int
	key   *tsigKey
	mac   []byte // MAC of the request, then of the last signed message
	now   time.Time

	out       []byte // messages not written yet, each after its length
	buf       []byte // the message being encoded, in out's spare room
	count     uint16
	messages  int
	records   int
	bytes     int
	dict      nameDict
	prevOwner []byte
	prevOff   int
	started   bool
}

func (x *xfrWriter) begin() {
	// The message is encoded right after its length in out, so that
	// flush need not copy it; a record that outgrows the room moves it
	// elsewhere, and flush copies it then.
	if need := x.messageRoom(); cap(x.out)-len(x.out) < need {
		x.out = append(make([]byte, 0, len(x.out)+need), x.out...)
	}
	x.buf = x.out[len(x.out)+2 : len(x.out)+2]
	x.buf = append(x.buf, make([]byte, headerLen)...)
	x.count, x.prevOwner, x.prevOff = 0, nil, 0
	x.dict.reset()
	if x.messages == 0 {
		// The question goes in the first message only (RFC 5936 §2.2).
		x.buf, _ = x.dict.put(x.buf, x.q.msg[headerLen:x.q.qend-4])
		x.buf = append(x.buf, x.q.msg[x.q.qend-4:x.q.qend]...)
	}
	x.started = true
}

// add appends one record: owner is an absolute wire name, rr an
// owner-less record (db.RRs form). A record that would overflow the
// message is taken out again and starts the next one.
func (x *xfrWriter) add(owner, rr []byte) error {
	if !x.started {
		x.begin()
	}
	mark := len(x.buf)
	x.put(owner, rr)
	if len(x.buf) > x.limit && x.count > 0 {
		x.buf = x.buf[:mark]
		if err := x.flush(); err != nil {
			return err
		}
		x.begin()
		x.put(owner, rr)
	}
	x.count++
	x.records++
	return nil
}

func (x *xfrWriter) put(owner, rr []byte) {
	if x.prevOwner != nil && bytes.Equal(owner, x.prevOwner) && x.prevOff <= maxPointer {
		x.buf = append(x.buf, byte(0xC0|x.prevOff>>8), byte(x.prevOff))
	} else {
		x.buf, x.prevOff = x.dict.put(x.buf, owner)
		x.prevOwner = owner
	}
	x.buf = x.dict.putRR(x.buf, rr)
}

// flush writes the current message.
func (x *xfrWriter) flush() error {
	h := x.buf[:headerLen]
	binary.BigEndian.PutUint16(h[0:], x.q.id)
	binary.BigEndian.PutUint16(h[2:], flagQR|flagAA|x.q.flags&flagRD)
	qd := uint16(0)
	if x.messages == 0 {
		qd = 1
	}
	binary.BigEndian.PutUint16(h[4:], qd)
	binary.BigEndian.PutUint16(h[6:], x.count)
	binary.BigEndian.PutUint16(h[8:], 0)
	binary.BigEndian.PutUint16(h[10:], 0)
	msg := x.buf
	if x.key != nil {
		msg, x.mac = x.key.sign(msg, x.mac, x.messages > 0, x.now)
	}
	at := len(x.out)
	if end := at + 2 + len(msg); end <= cap(x.out) && &x.out[:end][at+2] == &msg[0] {
		x.out = x.out[:end] // encoded in place
	} else {
		x.out = append(append(x.out, 0, 0), msg...)
	}
	binary.BigEndian.PutUint16(x.out[at:], uint16(len(msg)))
	x.messages++
	x.bytes += len(msg)
	x.buf = nil
	x.started = false
	if cap(x.out)-len(x.out) >= x.messageRoom() {
		return nil
	}
	if cap(x.out) < xfrWriteBatch {
		// More than one message: batch them (a small transfer, an IXFR,
		// keeps its small buffer).
		x.out = append(make([]byte, 0, xfrWriteBatch), x.out...)
		return nil
	}
	return x.write()
}

// messageRoom is the room begin leaves for a message: its length, the
// limit, and a record that crosses it.
func (x *xfrWriter) messageRoom() int { return 2 + x.limit + 4<<10 }

// write hands the messages encoded so far to the connection.
func (x *xfrWriter) write() error {
	_, err := x.w.Write(x.out)
	x.out = x.out[:0]
	return err
}

// finish ends the message being encoded and writes what is pending.
func (x *xfrWriter) finish() error {
	if !x.started {
		x.begin()
	}
	if err := x.flush(); err != nil {
		return err
	}
	return x.write()
}

// transferResult is what one transfer sent.
type transferResult struct {
	kind     string // "AXFR", "IXFR" or "IXFR-SOA" (client up to date)
	serial   uint32
	records  int
	messages int
	bytes    int
}

// serveTransfer answers an AXFR or IXFR on a TCP connection. w is the
// connection's buffered writer; flush is called once the answer is out.
func (s *Server) serveTransfer(w io.Writer, flush func() error, q *query, src netip.AddrPort, setDeadline func(time.Time)) error {
	acc := s.access.Load()
	sn := s.snap.Load()
	z, zoff := sn.findZone(q.lower())
	kind := dns.TypeToString[q.qtype]
	reply := func(rcode int) error {
		s.xfrRefused.Add(1)
		var r response
		r.start(q, nil, maxTCPSize, s.udpSize)
		r.rcode = rcode
		msg := r.finish(q.id)
		var l [2]byte
		binary.BigEndian.PutUint16(l[:], uint16(len(msg)))
		w.Write(l[:])
		w.Write(msg)
		return flush()
	}
	if z == nil || zoff != 0 {
		s.log.Info("transfer refused: not a zone apex", "qtype", kind, "name", wireString(q.lower()), "client", src.String())
		return reply(dns.RcodeRefused)
	}
	var key *tsigKey
	var mac []byte
	if q.signed {
		v := verifyTSIG(q.msg, acc.keys)
		if v.err != nil {
			s.log.Warn("transfer refused: bad TSIG", "zone", z.name, "client", src.String(), "key", v.key, "err", v.err)
			s.xfrRefused.Add(1)
			msg := s.tsigErrorReply(q, v, nil)
			w.Write(binary.BigEndian.AppendUint16(nil, uint16(len(msg))))
			w.Write(msg)
			return flush()
		}
		key, mac = acc.keys[v.key], v.mac
	}
	if !acc.mayTransfer(z.name, src.Addr()) {
		s.log.Warn("transfer refused", "zone", z.name, "qtype", kind, "client", src.String())
		return reply(dns.RcodeRefused)
	}
	if need := acc.requiredKey(src.Addr()); need != nil && need != key {
		s.log.Warn("transfer refused: peer must sign with its TSIG key", "zone", z.name, "client", src.String(), "key", need.nameStr)
		return reply(dns.RcodeNotAuth)
	}
	x := &xfrWriter{w: w, q: q, zone: z.wire, limit: xfrMessageLimit, key: key, mac: mac, now: time.Now()}
	if key != nil {
		x.limit -= tsigRoom
	}
	start := time.Now()
	setDeadline(start.Add(xfrWriteTimeout))
	res, err := s.writeTransfer(x, z, q, src.Addr())
	if err == nil {
		err = flush()
	}
	if err != nil {
		s.log.Warn("transfer failed", "zone", z.name, "qtype", kind, "client", src.String(), "err", err)
		return err
	}
	// asked and from: what the peer asked for (an IXFR may be answered
	// with the whole zone: kind AXFR).
	asked := []any{"asked", kind}
	if q.qtype == dns.TypeIXFR && q.hasIXFRSOA {
		asked = append(asked, "from", q.ixfrSerial)
	}
	s.log.Info("transfer", append([]any{"zone", z.name, "kind", res.kind, "serial", res.serial, "client", src.String(),
		"records", res.records, "messages", res.messages, "bytes", res.bytes, "took", time.Since(start).String()}, asked...)...)
	s.peers.transferred(src.Addr(), z.name, res)
	s.serials.transferred(z.name, src.Addr())
	switch res.kind {
	case "AXFR":
		s.xfrAXFR.Add(1)
	case "IXFR":
		s.xfrIXFR.Add(1)
	default:
		s.xfrUpToDate.Add(1)
	}
	return nil
}

// writeTransfer sends the zone, or the journal's difference for an IXFR
// whose serial it holds and the serial check vouches for (serialcheck.go)
// to peer.
func (s *Server) writeTransfer(x *xfrWriter, z *zone, q *query, peer netip.Addr) (transferResult, error) {
	if q.qtype == dns.TypeIXFR && q.hasIXFRSOA {
		if !db.SerialLess(q.ixfrSerial, z.serial) {
			// Up to date (or ahead): the single SOA (RFC 1995 §4).
			if err := x.add(z.wire, z.soa()); err != nil {
				return transferResult{}, err
			}
			err := x.finish()
			return transferResult{kind: "IXFR-SOA", serial: z.serial, records: x.records, messages: x.messages, bytes: x.bytes}, err
		}
		var entries []db.JournalEntry
		ok := false
		if s.serials.vouchesFor(z.name, peer) {
			var err error
			if entries, ok, err = s.store.Journal(z.name, q.ixfrSerial); err != nil {
				return transferResult{}, err
			}
		}
		if ok && len(entries) > 0 && s.ixfrWorthIt(entries, z) {
			last := entries[len(entries)-1]
			if err := writeIXFR(x, z.wire, entries); err != nil {
				return transferResult{}, err
			}
			return transferResult{kind: "IXFR", serial: last.To, records: x.records, messages: x.messages, bytes: x.bytes}, nil
		}
		// Too old, unknown or bigger than the zone: the whole zone, which
		// is a valid IXFR answer (RFC 1995 §4).
	}
	if z.names == nil {
		// Cold zone (cns has just started): sent from the store, a chunk
		// per read transaction (xfrcold.go), while the warm-up builds the
		// table. The answers above need only the journal.
		if sent, err := s.writeColdAXFR(x, z); sent || err != nil {
			return transferResult{kind: "AXFR", serial: z.serial, records: x.records, messages: x.messages, bytes: x.bytes}, err
		}
		// A commit came first: the table has the zone at its serial.
		if err := s.warmZone(z.wire); err != nil {
			return transferResult{}, err
		}
		warm := s.snap.Load().zones[string(z.wire)]
		if warm == nil {
			return transferResult{}, fmt.Errorf("zone %s removed while it was loaded", z.name)
		}
		z = warm
	}
	if err := writeAXFR(x, z); err != nil {
		return transferResult{}, err
	}
	return transferResult{kind: "AXFR", serial: z.serial, records: x.records, messages: x.messages, bytes: x.bytes}, nil
}

// ixfrWorthIt reports whether the difference is smaller than the zone
// (db.IXFRWorthIt: the journal keeps only entries that can pass).
func (s *Server) ixfrWorthIt(entries []db.JournalEntry, z *zone) bool {
	n := 0
	for _, e := range entries {
		n += len(e.Deleted) + len(e.Added) + 2
	}
	if db.IXFRWorthIt(n, 0) {
		return true // small: no need to know the zone's size
	}
	size := 0
	if z.names != nil {
		size = z.names.names
	} else if zi, ok, err := s.store.Zone(z.name); err == nil && ok {
		size = zi.Names // cold: the stored count, without loading the zone
	}
	return db.IXFRWorthIt(n, size)
}

// writeAXFR sends SOA, NS, every record, SOA.
func writeAXFR(x *xfrWriter, z *zone) error {
	return writeZone(x, z, func(add func(name, rrs []byte) error) error {
		var err error
		send := func(name, rrs []byte) {
			if err == nil {
				err = add(name, rrs)
			}
		}
		// Grouped by owner (xfrorder.go), which makes the transfer a fifth
		// smaller; hash order if the table cannot be indexed.
		if o := z.names.transferOrder(z.wire); o != nil {
			z.names.eachInTransferOrder(o, send)
		} else {
			z.names.each(func(name, rrs []byte, _ uint32) { send(name, rrs) })
		}
		return err
	})
}

// writeZone sends an AXFR's frame: the SOA and the apex NS first, then the
// names body gives to add, the SOA again last (RFC 5936 §2.2). It is the
// one frame of a transfer from the table and from the store (xfrcold.go).
func writeZone(x *xfrWriter, z *zone, body func(add func(name, rrs []byte) error) error) error {
	soa := z.soa()
	if err := x.add(z.wire, soa); err != nil {
		return err
	}
	add := func(name, rrs []byte) error {
		var err error
		db.RRs(rrs).Each(func(rr []byte) {
			if err == nil {
				err = x.add(name, rr)
			}
		})
		return err
	}
	ns, _ := rrsOfType(z.apexRRs, dns.TypeNS)
	if err := add(z.wire, ns); err != nil {
		return err
	}
	if err := body(add); err != nil {
		return err
	}
	if err := x.add(z.wire, soa); err != nil {
		return err
	}
	return x.finish()
}

// writeIXFR sends the difference sequences of entries (RFC 1995 §4):
// SOA(new), then per entry SOA(from), deletions, SOA(to), additions, and
// SOA(new) again.
func writeIXFR(x *xfrWriter, zone []byte, entries []db.JournalEntry) error {
	last := entries[len(entries)-1].SOATo
	steps := [][2][]byte{{zone, last}}
	for _, e := range entries {
		steps = append(steps, [2][]byte{zone, e.SOAFrom})
		for _, r := range e.Deleted {
			steps = append(steps, [2][]byte{r.Owner, r.RR})
		}
		steps = append(steps, [2][]byte{zone, e.SOATo})
		for _, r := range e.Added {
			steps = append(steps, [2][]byte{r.Owner, r.RR})
		}
	}
	steps = append(steps, [2][]byte{zone, last})
	for _, st := range steps {
		if err := x.add(st[0], st[1]); err != nil {
			return err
		}
	}
	return x.finish()
}

// udpTransfer answers AXFR over UDP with REFUSED (RFC 5936 §4.2), and IXFR
// over UDP with the difference when it fits one datagram, else the
// current SOA, which sends the client to TCP (RFC 1995 §2).
func (s *Server) udpTransfer(q *query, b []byte, limit int) []byte {
	sn := s.snap.Load()
	z, zoff := sn.findZone(q.lower())
	if q.qtype == dns.TypeAXFR || z == nil || zoff != 0 {
		return s.errorReply(q, b, dns.RcodeRefused)
	}
	acc := s.access.Load()
	if q.signed || acc.requiredKey(q.src.Addr()) != nil || !acc.mayTransfer(z.name, q.src.Addr()) {
		// Signed and key-bound transfers use TCP; the SOA tells nothing
		// the zone's public SOA does not.
		return s.soaOnly(q, b, z)
	}
	if q.hasIXFRSOA && db.SerialLess(q.ixfrSerial, z.serial) {
		entries, ok, err := s.store.Journal(z.name, q.ixfrSerial)
		if err == nil && ok && len(entries) > 0 {
			var out bytes.Buffer
			x := &xfrWriter{w: &out, q: q, zone: z.wire, limit: udpLimit(q, s.udpSize), now: time.Now()}
			if writeIXFR(x, z.wire, entries) == nil && x.messages == 1 {
				return append(b[:0], out.Bytes()[2:]...)
			}
		}
	}
	return s.soaOnly(q, b, z)
}

func (s *Server) soaOnly(q *query, b []byte, z *zone) []byte {
	var r response
	r.start(q, b, minUDPSize, s.udpSize)
	r.flags |= flagAA
	if !r.appendRRs(z.soa(), headerLen, &r.an) {
		r.truncate()
	}
	return r.finish(q.id)
}

// udpLimit is the answer size a UDP query allows.
func udpLimit(q *query, ours uint16) int {
	switch {
	case !q.edns || q.ednsSize < minUDPSize:
		return minUDPSize
	case q.ednsSize < ours:
		return int(q.ednsSize)
	}
	return int(ours)
}

// tsigErrorReply answers a request whose TSIG failed: NOTAUTH with a TSIG
// record carrying the error, no MAC, and for BADTIME the server's time
// (RFC 8945 §5.2). It is built by hand: miekg/dns will not pack a TSIG
// record it did not sign.
func (s *Server) tsigErrorReply(q *query, v requestTSIG, b []byte) []byte {
	var m dns.Msg
	if err := m.Unpack(q.msg); err != nil || m.IsTsig() == nil {
		return s.errorReply(q, b, dns.RcodeFormatError)
	}
	t := m.IsTsig()
	var r response
	r.start(q, b, maxTCPSize, s.udpSize)
	r.edns = false // the TSIG record must be the last one
	r.rcode = dns.RcodeNotAuth
	out := r.finish(q.id)
	name := make([]byte, 256)
	n, err := dns.PackDomainName(strings.ToLower(t.Hdr.Name), name, 0, nil, false)
	if err != nil {
		return out
	}
	alg := make([]byte, 256)
	// An empty algorithm (a TSIG record with no RDATA) packs to nothing:
	// the root name keeps the record well-formed.
	an, err := dns.PackDomainName(dns.Fqdn(strings.ToLower(t.Algorithm)), alg, 0, nil, false)
	if err != nil {
		return out
	}
	now := uint64(time.Now().Unix())
	timers := []byte{byte(now >> 40), byte(now >> 32), byte(now >> 24), byte(now >> 16), byte(now >> 8), byte(now), byte(tsigFudge >> 8), byte(tsigFudge & 0xff)}
	var other []byte
	if v.rcode == dns.RcodeBadTime {
		other = timers[:6]
	}
	rd := append([]byte(nil), alg[:an]...)
	rd = append(rd, timers...)
	rd = append(rd, 0, 0) // MAC size 0
	rd = binary.BigEndian.AppendUint16(rd, m.Id)
	rd = binary.BigEndian.AppendUint16(rd, uint16(v.rcode))
	rd = binary.BigEndian.AppendUint16(rd, uint16(len(other)))
	rd = append(rd, other...)
	out = append(out, name[:n]...)
	out = append(out, byte(dns.TypeTSIG>>8), byte(dns.TypeTSIG), 0, byte(dns.ClassANY), 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint16(out, uint16(len(rd)))
	out = append(out, rd...)
	binary.BigEndian.PutUint16(out[10:], binary.BigEndian.Uint16(out[10:])+1)
	return out
}

// wireString renders a wire name for logs.
func wireString(w []byte) string {
	s, _, err := dns.UnpackDomainName(w, 0)
	if err != nil {
		return fmt.Sprintf("%x", w)
	}
	return s
}
