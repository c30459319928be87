package serve

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/serve/policy"
)

// fuzzConn is a net.Conn that reads a fixed byte stream and records what is
// written, so serveConn runs synchronously on fuzz input.
type fuzzConn struct {
	r *bytes.Reader
	w bytes.Buffer
}

func (c *fuzzConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *fuzzConn) Write(b []byte) (int, error) { return c.w.Write(b) }
func (c *fuzzConn) Close() error                { return nil }
func (c *fuzzConn) LocalAddr() net.Addr         { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }
func (c *fuzzConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (c *fuzzConn) SetDeadline(time.Time) error      { return nil }
func (c *fuzzConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fuzzConn) SetWriteDeadline(time.Time) error { return nil }

// fuzzSeeds are well-formed and malformed requests of every kind the
// server distinguishes.
func fuzzSeeds(t testing.TB) [][]byte {
	var out [][]byte
	pack := func(m *dns.Msg) {
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"web1.inst.owner.dc.example.com.", dns.TypeA},
		{"WEB.svc.owner.dc.example.com.", dns.TypeSRV},
		{"inst.owner.dc.example.com.", dns.TypeTXT},
		{"nope.dc.example.com.", dns.TypeA},
		{"aaaaaaaa.cmon.dc.example.com.", dns.TypeA},
		{"loop1.dc.example.com.", dns.TypeA},
		{"dc.example.com.", dns.TypeANY},
		{"dc.example.com.", dns.TypeSOA},
		{"1.0.0.10.in-addr.arpa.", dns.TypePTR},
		{"www.example.org.", dns.TypeA},
		// Owner-less names, for the client-answers servers.
		{"web.svc.dc.example.com.", dns.TypeSRV},
		{"self.inst.dc.example.com.", dns.TypeA},
		{"db-1.inst.dc.example.com.", dns.TypeTXT},
		{"_grpclb._tcp.web.svc.dc.example.com.", dns.TypeSRV},
	} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		pack(m)
		m.SetEdns0(4096, true)
		pack(m)
	}
	m := new(dns.Msg)
	m.SetQuestion("version.bind.", dns.TypeTXT)
	m.Question[0].Qclass = dns.ClassCHAOS
	pack(m)
	m = new(dns.Msg)
	m.SetQuestion("web1.inst.owner.dc.example.com.", dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().SetVersion(1)
	pack(m)
	m.IsEdns0().SetVersion(0)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_LOCAL{Code: 65001, Data: bytes.Repeat([]byte{7}, 300)})
	pack(m)
	m = new(dns.Msg)
	m.SetQuestion("dc.example.com.", dns.TypeAXFR)
	pack(m)
	m = new(dns.Msg)
	m.SetIxfr("dc.example.com.", 1, "ns1.example.com.", "hostmaster.example.com.")
	pack(m)
	m = new(dns.Msg)
	m.SetNotify("dc.example.com.")
	pack(m)
	m = new(dns.Msg)
	m.SetQuestion("dc.example.com.", dns.TypeSOA)
	m.Opcode = dns.OpcodeUpdate
	pack(m)
	// Signed: a good key name with a garbage MAC, and an unknown key.
	for _, key := range []string{"xfr-key.", "other."} {
		m = new(dns.Msg)
		m.SetQuestion("dc.example.com.", dns.TypeSOA)
		m.SetTsig(key, dns.HmacSHA256, 300, time.Now().Unix())
		b, _, err := dns.TsigGenerate(m, testKey.Secret, "", false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	out = append(out,
		[]byte{1, 2, 3},
		[]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12, 0, 1, 0, 1},
		[]byte{0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1},
		[]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1},
	)
	return out
}

// fuzzServers returns a cold and a warm server for the test store, and a
// cold and a warm one with client answers on for the client store, not
// listening: requests go straight to handle and serveConn.
func fuzzServers(t testing.TB) []*Server {
	var out []*Server
	for _, clients := range []bool{false, true} {
		for _, warm := range []bool{false, true} {
			store := testStore(t)
			if clients {
				store = clientStore(t)
			}
			var ca policy.ClientAnswers
			if clients {
				ca.Networks = []string{"0b0c5b1e-0000-4000-8000-000000000001"}
			}
			s, err := New(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "cns fuzz", Identity: "fuzz",
				Access:        Access{AllowTransfer: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Keys: []policy.Key{testKey}},
				ClientAnswers: ca}, store)
			if err != nil {
				t.Fatal(err)
			}
			if warm {
				if err := s.Warm(); err != nil {
					t.Fatal(err)
				}
			}
			out = append(out, s)
		}
	}
	return out
}

// fuzzEndpoints are where fuzzed queries come from and arrive: an unknown
// source, an identified one, an ambiguous one, and a fabric source on the
// client-only listener of its fabric.
var fuzzEndpoints = []query{
	{src: netip.MustParseAddrPort("127.0.0.1:40000")},
	{src: netip.MustParseAddrPort(srcA1 + ":40000")},
	{src: netip.MustParseAddrPort(srcBoth + ":40000")},
	{src: netip.MustParseAddrPort(srcFabric + ":40000"), conn: &queryConn{endpoint: endpoint{local: netip.MustParseAddr(fabricListen), clientOnly: true}}},
}

// checkReply asserts that resp is a DNS message miekg/dns unpacks, an
// answer (QR) to request msg with its ID, within limit bytes.
func checkReply(t *testing.T, msg, resp []byte, limit int) {
	t.Helper()
	var r dns.Msg
	if err := r.Unpack(resp); err != nil {
		t.Fatalf("reply to %x does not unpack: %v\n%x", msg, err, resp)
	}
	if !r.Response {
		t.Fatalf("reply to %x without QR", msg)
	}
	if r.Id != binary.BigEndian.Uint16(msg) {
		t.Fatalf("reply to %x has ID %d", msg, r.Id)
	}
	if len(resp) > limit {
		t.Fatalf("reply to %x is %d bytes, over %d", msg, len(resp), limit)
	}
}

// FuzzQuery: any bytes in gives a valid answer or none, never a panic,
// over UDP (one datagram) and TCP (the same bytes as one framed request,
// and as a raw stream of framed requests).
func FuzzQuery(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	servers := fuzzServers(f)
	f.Fuzz(func(t *testing.T, msg []byte) {
		for i, s := range servers {
			// UDP, as serveUDP calls it, from every endpoint (the first
			// only for servers without client answers).
			for _, ep := range fuzzEndpoints[:1+3*(i/2)] {
				q := ep
				buf := make([]byte, 0, 2048)
				resp := s.handle(&q, msg, buf, minUDPSize)
				if q.forward {
					t.Fatalf("%x: forwarded with forwarding off", msg)
				}
				if resp == nil {
					if len(msg) >= headerLen && msg[2]&0x80 == 0 {
						t.Fatalf("%x: no answer to a request", msg)
					}
				} else {
					limit := udpLimit(&q, s.udpSize)
					if q.signed {
						limit = maxTCPSize // TSIG error replies and signed answers may exceed it
					}
					checkReply(t, msg, resp, max(limit, minUDPSize))
				}
			}

			// TCP: the message framed, then the same bytes as a stream.
			if len(msg) > maxTCPSize {
				continue
			}
			framed := binary.BigEndian.AppendUint16(nil, uint16(len(msg)))
			framed = append(framed, msg...)
			for _, stream := range [][]byte{framed, msg} {
				c := &fuzzConn{r: bytes.NewReader(stream)}
				s.serveConn(c, endpoint{})
				out := c.w.Bytes()
				for len(out) > 0 {
					if len(out) < 2 {
						t.Fatalf("TCP reply to %x: stray byte", stream)
					}
					n := int(binary.BigEndian.Uint16(out))
					if len(out) < 2+n {
						t.Fatalf("TCP reply to %x: frame of %d bytes, %d left", stream, n, len(out)-2)
					}
					var r dns.Msg
					if err := r.Unpack(out[2 : 2+n]); err != nil {
						t.Fatalf("TCP reply to %x does not unpack: %v\n%x", stream, err, out[2:2+n])
					}
					if !r.Response {
						t.Fatalf("TCP reply to %x without QR", stream)
					}
					out = out[2+n:]
				}
			}
		}
	})
}
