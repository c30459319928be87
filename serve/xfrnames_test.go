package serve

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// splitOwner packs rr uncompressed and splits it into its wire owner name
// and the owner-less record the transfer writer takes (db.RRs form).
func splitOwner(t *testing.T, rr dns.RR) (owner, rest []byte) {
	t.Helper()
	buf := make([]byte, dns.Len(rr)+256)
	n, err := dns.PackRR(rr, buf, 0, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	l := wireNameLen(buf[:n])
	return buf[:l], buf[l:n]
}

// Ensure the transfer writer compresses every name against the whole
// message (owners, and the names in CNAME, NS, PTR, MX and SOA RDATA,
// never SRV's target), that every message unpacks with miekg/dns to the
// records put in, across message boundaries, and that no pointer leads to
// a pointer or past the first 16 KiB.
func TestTransferNameCompression(t *testing.T) {
	zone := "dc.example.com."
	var in []dns.RR
	in = append(in, mustRR(t, zone+" 30 IN SOA ns1.example.com. hostmaster.example.com. 7 30 60 600 30"),
		mustRR(t, zone+" 3600 IN NS ns1.example.com."))
	for i := range 400 {
		o := fmt.Sprintf("%08x-1111.%s", i/20, zone)
		inst := fmt.Sprintf("vm%d.inst.%s", i, o)
		in = append(in,
			mustRR(t, fmt.Sprintf("%s 30 IN A 10.0.%d.%d", inst, i>>8, i&255)),
			mustRR(t, fmt.Sprintf(`%s 30 IN TXT "vm %d"`, inst, i)),
			mustRR(t, fmt.Sprintf("vm%d.cmon.%s 30 IN CNAME cmon.%s", i, zone, zone)),
			mustRR(t, fmt.Sprintf("svc%d.svc.%s 30 IN SRV 0 10 443 %s", i/5, o, inst)),
			mustRR(t, fmt.Sprintf("mx%d.%s 30 IN MX 10 %s", i, zone, inst)))
	}
	in = append(in, in[0])

	plain := 0
	for _, rr := range in {
		owner, rest := splitOwner(t, rr)
		plain += len(owner) + len(rest)
	}
	for _, limit := range []int{xfrMessageLimit, 4000} {
		var out bytes.Buffer
		x := writeTransfer(t, &out, zone, in, limit)
		msgs := checkTransferStream(t, out.Bytes(), in, limit)
		if x.bytes > plain*2/3 {
			t.Errorf("limit %d: %d bytes for %d uncompressed", limit, x.bytes, plain)
		}
		if limit == 4000 && msgs < 10 {
			t.Errorf("limit 4000: only %d messages", msgs)
		}
		t.Logf("limit %d: %d messages, %d bytes (uncompressed %d)", limit, msgs, x.bytes, plain)
	}
}

// checkTransferStream unpacks the length-prefixed messages of a transfer
// with miekg/dns and fails unless they hold the records in, in order,
// each message within limit and its pointers sound. It returns the number
// of messages.
func checkTransferStream(t *testing.T, stream []byte, in []dns.RR, limit int) int {
	t.Helper()
	var got []dns.RR
	msgs := 0
	for len(stream) > 0 {
		l := int(binary.BigEndian.Uint16(stream))
		msg := stream[2 : 2+l]
		stream = stream[2+l:]
		msgs++
		if l > limit {
			t.Errorf("limit %d: message of %d bytes", limit, l)
		}
		checkPointers(t, msg)
		var r dns.Msg
		if err := r.Unpack(msg); err != nil {
			t.Fatalf("limit %d: message %d does not unpack: %v", limit, msgs, err)
		}
		got = append(got, r.Answer...)
	}
	if len(got) != len(in) {
		t.Fatalf("limit %d: %d records, want %d", limit, len(got), len(in))
	}
	for i := range in {
		if got[i].String() != in[i].String() {
			t.Fatalf("limit %d: record %d is %s, want %s", limit, i, got[i], in[i])
		}
	}
	return msgs
}

// Ensure names that share suffixes in every way (the writer reuses the
// previous name's hashes and offsets) still unpack to what was put in:
// random names over a few labels, owners and CNAME, MX and NS targets,
// across many small messages.
func TestTransferNameCompressionRandom(t *testing.T) {
	zone := "dc.example.com."
	labels := []string{"a", "b", "ab", "inst", "svc", "0000000a-1111-4000-8000-00000000000a", "0000000b-1111-4000-8000-00000000000b", "example"}
	rnd := rand.New(rand.NewPCG(21, 5936))
	name := func() string {
		var sb strings.Builder
		for range 1 + rnd.IntN(5) {
			sb.WriteString(labels[rnd.IntN(len(labels))] + ".")
		}
		if rnd.IntN(8) == 0 {
			return sb.String() + "example.org."
		}
		return sb.String() + zone
	}
	in := []dns.RR{mustRR(t, zone+" 30 IN SOA ns1.example.com. hostmaster.example.com. 7 30 60 600 30")}
	for i := range 3000 {
		switch owner := name(); rnd.IntN(4) {
		case 0:
			in = append(in, mustRR(t, fmt.Sprintf("%s 30 IN A 10.0.%d.%d", owner, i>>8, i&255)))
		case 1:
			in = append(in, mustRR(t, fmt.Sprintf("%s 30 IN CNAME %s", owner, name())))
		case 2:
			in = append(in, mustRR(t, fmt.Sprintf("%s 30 IN MX %d %s", owner, i, name())))
		default:
			in = append(in, mustRR(t, fmt.Sprintf("%s 30 IN NS %s", owner, name())))
		}
	}
	in = append(in, in[0])
	for _, limit := range []int{xfrMessageLimit, 700} {
		var out bytes.Buffer
		x := writeTransfer(t, &out, zone, in, limit)
		msgs := checkTransferStream(t, out.Bytes(), in, limit)
		t.Logf("limit %d: %d messages, %d bytes", limit, msgs, x.bytes)
	}
}

// writeTransfer sends in (a whole transfer of zone, SOA first and last)
// through an xfrWriter of the given message limit into w, as the answer
// to an AXFR query, and returns the writer.
func writeTransfer(t *testing.T, w io.Writer, zone string, in []dns.RR, limit int) *xfrWriter {
	t.Helper()
	m := new(dns.Msg)
	m.SetAxfr(zone)
	pkt, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	q := &query{tcp: true}
	if res := q.parse(pkt); res != parseOK {
		t.Fatalf("parse: %v", res)
	}
	zwire, _ := splitOwner(t, in[0])
	x := &xfrWriter{w: w, q: q, zone: zwire, limit: limit, now: time.Now()}
	for _, rr := range in {
		owner, rest := splitOwner(t, rr)
		if err := x.add(owner, rest); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.finish(); err != nil {
		t.Fatal(err)
	}
	return x
}

// checkPointers walks every name of msg's records and fails on a pointer
// that leads to a pointer, forward, or past maxPointer, and on an SRV
// target that is compressed.
func checkPointers(t *testing.T, msg []byte) {
	t.Helper()
	name := func(off int) int { // returns the offset after the name
		for {
			l := int(msg[off])
			if l&0xC0 == 0xC0 {
				p := (l&0x3F)<<8 | int(msg[off+1])
				if p >= off || p > maxPointer || msg[p]&0xC0 == 0xC0 {
					t.Fatalf("pointer at %d to %d", off, p)
				}
				return off + 2
			}
			if l == 0 {
				return off + 1
			}
			off += l + 1
		}
	}
	off := name(headerLen)
	if binary.BigEndian.Uint16(msg[4:]) == 0 {
		off = headerLen
	} else {
		off += 4
	}
	for range binary.BigEndian.Uint16(msg[6:]) {
		off = name(off)
		typ := binary.BigEndian.Uint16(msg[off:])
		rdl := int(binary.BigEndian.Uint16(msg[off+8:]))
		rd := off + 10
		switch typ {
		case dns.TypeCNAME, dns.TypeNS, dns.TypePTR:
			name(rd)
		case dns.TypeMX:
			name(rd + 2)
		case dns.TypeSRV:
			if wireNameLen(msg[rd+6:rd+rdl]) != rdl-6 {
				t.Fatalf("SRV target at %d compressed", rd+6)
			}
		}
		off = rd + rdl
	}
}

// Ensure a hash collision or a suffix that differs only in bytes the hash
// misses never produces a wrong pointer: the candidate is compared.
func TestNameDictCompares(t *testing.T) {
	var d nameDict
	d.reset()
	a, _ := splitOwner(t, mustRR(t, "a.example.com. 30 IN A 10.0.0.1"))
	b, _ := splitOwner(t, mustRR(t, "b.example.org. 30 IN A 10.0.0.1"))
	msg := make([]byte, headerLen)
	msg, _ = d.put(msg, a)
	var pos [128]uint8
	var hs [128]uint64
	n := suffixHashes(b, &pos, &hs)
	// make every suffix of b collide with the whole of a
	for k := range n {
		d.set(hs[k], headerLen)
	}
	start := len(msg)
	msg, _ = d.put(msg, b)
	if !bytes.Equal(msg[start:], b) {
		t.Fatalf("colliding name written as %x, want %x", msg[start:], b)
	}
}

// writeCounter counts the writes a transfer makes and keeps their bytes.
type writeCounter struct {
	bytes.Buffer
	writes int
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// Ensure the writer hands many messages to the connection in a few large
// writes, and that a record bigger than the room left for a message (40 KB
// TXT records, a message each) still reaches the stream intact.
func TestTransferWriteBatches(t *testing.T) {
	zone := "dc.example.com."
	in := []dns.RR{mustRR(t, zone+" 30 IN SOA ns1.example.com. hostmaster.example.com. 7 30 60 600 30")}
	big := strings.Repeat(`"`+strings.Repeat("x", 250)+`" `, 160)
	for i := range 20000 {
		o := fmt.Sprintf("vm%d.inst.%08x-1111.%s", i, i/50, zone)
		in = append(in, mustRR(t, fmt.Sprintf("%s 30 IN A 10.0.%d.%d", o, i>>8, i&255)))
		if i%300 == 0 {
			in = append(in, mustRR(t, fmt.Sprintf("%s 30 IN TXT %s", o, big)))
		}
	}
	in = append(in, in[0])
	var out writeCounter
	writeTransfer(t, &out, zone, in, xfrMessageLimit)
	msgs := checkTransferStream(t, out.Bytes(), in, 64<<10)
	if want := out.Len()/xfrWriteBatch + 1; out.writes > want {
		t.Errorf("%d messages, %d bytes in %d writes, want at most %d", msgs, out.Len(), out.writes, want)
	}
	if msgs < 30 {
		t.Errorf("only %d messages: the test does not cross a batch", msgs)
	}
	t.Logf("%d messages, %d bytes in %d writes", msgs, out.Len(), out.writes)
}
