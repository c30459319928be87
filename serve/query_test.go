package serve

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/miekg/dns"
)

// lowerASCII lowers exactly 'A'-'Z', whatever the other bytes and
// wherever a byte falls in its eight-byte word.
func TestLowerASCII(t *testing.T) {
	naive := func(b []byte) []byte {
		out := bytes.Clone(b)
		for i, c := range out {
			if 'A' <= c && c <= 'Z' {
				out[i] = c + 32
			}
		}
		return out
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	inputs := [][]byte{nil, all, all[1:], all[63:70], []byte("\x07EXAMPLE\x03CoM\x00")}
	for range 2000 {
		b := make([]byte, rng.IntN(maxNameLen+1))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		inputs = append(inputs, b)
	}
	for _, in := range inputs {
		var got [maxNameLen + 1]byte
		copy(got[:], in)
		lowerASCII(&got, len(in))
		if want := naive(in); !bytes.Equal(got[:len(in)], want) {
			t.Fatalf("lowerASCII(%x) = %x, want %x", in, got[:len(in)], want)
		}
	}
}

// The question keeps its case for the answer; the name looked up is
// lower case; a name longer than 255 bytes or running past the message
// is refused.
func TestParseName(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("Web-01.SVC.Owner.DC.example.COM.", dns.TypeA)
	msg, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	var q query
	if res := q.parse(msg); res != parseOK {
		t.Fatalf("parse: %v", res)
	}
	if want := "\x06Web-01\x03SVC\x05Owner\x02DC\x07example\x03COM\x00"; string(q.qname) != want {
		t.Errorf("qname %q, want %q", q.qname, want)
	}
	if want := "\x06web-01\x03svc\x05owner\x02dc\x07example\x03com\x00"; string(q.lower()) != want {
		t.Errorf("lower %q, want %q", q.lower(), want)
	}
	// labels of 63, 63, 63 and k bytes and the root: 193 + k + 1 bytes
	name := func(k int) []byte {
		b := bytes.Repeat([]byte("\x3f"+string(bytes.Repeat([]byte("a"), 63))), 3)
		b = append(b, byte(k))
		return append(append(b, bytes.Repeat([]byte("b"), k)...), 0)
	}
	for _, n := range [][]byte{name(62), []byte("\x05abc"), []byte("\x03abc"), []byte("\xc0\x0c")} {
		q := query{msg: append(make([]byte, headerLen), n...)}
		if _, ok := q.parseName(headerLen); ok {
			t.Errorf("parseName(%q) accepted", n)
		}
	}
	longest := name(61) // 255 bytes, the most a name may be
	q = query{msg: append(make([]byte, headerLen), longest...)}
	if end, ok := q.parseName(headerLen); !ok || end != headerLen+len(longest) || len(longest) != maxNameLen {
		t.Errorf("a %d-byte name: end %d, ok %v", len(longest), end, ok)
	}
}
