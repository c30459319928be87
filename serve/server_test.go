package serve

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

const (
	zoneName = "dc.example.com"
	vmA      = "aaaaaaaa-0000-4000-8000-000000000001"
	vmB      = "aaaaaaaa-0000-4000-8000-000000000002"
)

func testApex() db.Apex {
	return db.Apex{MName: "ns1.example.com.", RName: "hostmaster.example.com.", Refresh: 30, Retry: 60,
		Expire: 2592000, Minimum: 30, SOATTL: 30, NS: []string{"ns1.example.com.", "ns2.example.com."}, NSTTL: 3600}
}

func mustRR(t testing.TB, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

// testStore builds a store with a small zone: instances, a service with an
// SRV, a CNAME into the zone and a reverse zone.
func testStore(t testing.TB) *db.DB {
	t.Helper()
	d, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	rec := func(zone, s string) db.Record { return db.Record{Zone: zone, RR: mustRR(t, s), Pref: 1} }
	const z = zoneName
	_, err = d.Commit(&db.ChangeSet{
		Zones: &db.ZoneConfig{Forward: map[string]db.Apex{z: testApex()}, Reverse: testApex()},
		VMs: []db.VMChange{
			{UUID: vmA, Records: []db.Record{
				rec(z, "web1.inst.owner.dc.example.com. 30 IN A 10.0.0.1"),
				rec(z, "web1.inst.owner.dc.example.com. 30 IN AAAA 2001:db8::1"),
				rec(z, `web1.inst.owner.dc.example.com. 30 IN TXT "`+vmA+`"`),
				rec(z, "web.svc.owner.dc.example.com. 30 IN A 10.0.0.1"),
				rec(z, "web.svc.owner.dc.example.com. 30 IN SRV 0 10 80 web1.inst.owner.dc.example.com."),
				rec(z, "cmon.dc.example.com. 30 IN A 10.0.0.9"),
				rec(z, "aaaaaaaa.cmon.dc.example.com. 30 IN CNAME cmon.dc.example.com."),
				rec(z, "out.dc.example.com. 30 IN CNAME elsewhere.example.org."),
				rec(z, "loop1.dc.example.com. 30 IN CNAME loop2.dc.example.com."),
				rec(z, "loop2.dc.example.com. 30 IN CNAME loop1.dc.example.com."),
				rec(z, "dangling.dc.example.com. 30 IN CNAME nothing.dc.example.com."),
				rec("0.0.10.in-addr.arpa", "1.0.0.10.in-addr.arpa. 30 IN PTR web1.inst.owner.dc.example.com."),
			}},
			{UUID: vmB, Records: []db.Record{
				rec(z, "web2.inst.owner.dc.example.com. 30 IN A 10.0.0.2"),
				rec(z, "web.svc.owner.dc.example.com. 30 IN A 10.0.0.2"),
				rec(z, "web.svc.owner.dc.example.com. 30 IN SRV 0 10 80 web2.inst.owner.dc.example.com."),
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// startServer serves store on 127.0.0.1, optionally warm.
func startServer(t testing.TB, store *db.DB, warm bool) (*Server, string) {
	t.Helper()
	s, err := New(Config{Listen: []string{"127.0.0.1:0"}, Version: "cns test", Identity: "test-host", UDPSockets: 2,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store)
	if err != nil {
		t.Fatal(err)
	}
	if warm {
		if err := s.Warm(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	udp, _ := s.Addrs()
	return s, udp[0]
}

func exchange(t testing.TB, addr, net string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: net, Timeout: 2 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s: %v", m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], err)
	}
	return r
}

// matchRRs compares rendered records; a wanted record ending in a space
// matches any record it is a prefix of (an SOA whose serial varies).
func matchRRs(got, want []string) bool {
	return slices.EqualFunc(got, want, func(g, w string) bool {
		return g == w || (strings.HasSuffix(w, " ") && strings.HasPrefix(g, w))
	})
}

func render(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, strings.ReplaceAll(rr.String(), "\t", " "))
	}
	return out
}

// Every case runs against the cold server (names looked up in the store)
// and the warm one (in-memory tables): they must answer identically.
func TestAnswers(t *testing.T) {
	soa := "dc.example.com. 30 IN SOA ns1.example.com. hostmaster.example.com. "
	cases := []struct {
		name   string
		qname  string
		qtype  uint16
		rcode  int
		aa     bool
		answer []string // exact, in order
		ns     []string // prefixes
		extra  []string
	}{
		{name: "A", qname: "web1.inst.owner.dc.example.com.", qtype: dns.TypeA, aa: true,
			answer: []string{"web1.inst.owner.dc.example.com. 30 IN A 10.0.0.1"}},
		{name: "case preserved", qname: "WeB1.InSt.OwNeR.Dc.ExAmPlE.cOm.", qtype: dns.TypeA, aa: true,
			answer: []string{"WeB1.InSt.OwNeR.Dc.ExAmPlE.cOm. 30 IN A 10.0.0.1"}},
		{name: "AAAA", qname: "web1.inst.owner.dc.example.com.", qtype: dns.TypeAAAA, aa: true,
			answer: []string{"web1.inst.owner.dc.example.com. 30 IN AAAA 2001:db8::1"}},
		{name: "TXT", qname: "web1.inst.owner.dc.example.com.", qtype: dns.TypeTXT, aa: true,
			answer: []string{`web1.inst.owner.dc.example.com. 30 IN TXT "` + vmA + `"`}},
		{name: "service", qname: "web.svc.owner.dc.example.com.", qtype: dns.TypeA, aa: true,
			answer: []string{"web.svc.owner.dc.example.com. 30 IN A 10.0.0.1", "web.svc.owner.dc.example.com. 30 IN A 10.0.0.2"}},
		{name: "SRV with additionals", qname: "web.svc.owner.dc.example.com.", qtype: dns.TypeSRV, aa: true,
			answer: []string{"web.svc.owner.dc.example.com. 30 IN SRV 0 10 80 web1.inst.owner.dc.example.com.",
				"web.svc.owner.dc.example.com. 30 IN SRV 0 10 80 web2.inst.owner.dc.example.com."},
			extra: []string{"web1.inst.owner.dc.example.com. 30 IN A 10.0.0.1", "web1.inst.owner.dc.example.com. 30 IN AAAA 2001:db8::1",
				"web2.inst.owner.dc.example.com. 30 IN A 10.0.0.2"}},
		{name: "NODATA", qname: "web2.inst.owner.dc.example.com.", qtype: dns.TypeMX, aa: true, ns: []string{soa}},
		{name: "NXDOMAIN", qname: "nope.inst.owner.dc.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, aa: true, ns: []string{soa}},
		{name: "NXDOMAIN below a name", qname: "x.web1.inst.owner.dc.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, aa: true, ns: []string{soa}},
		{name: "empty non-terminal", qname: "inst.owner.dc.example.com.", qtype: dns.TypeA, aa: true, ns: []string{soa}},
		{name: "empty non-terminal 2", qname: "owner.dc.example.com.", qtype: dns.TypeTXT, aa: true, ns: []string{soa}},
		{name: "apex SOA", qname: "dc.example.com.", qtype: dns.TypeSOA, aa: true, answer: []string{soa}},
		{name: "apex NS", qname: "DC.example.com.", qtype: dns.TypeNS, aa: true,
			answer: []string{"DC.example.com. 3600 IN NS ns1.example.com.", "DC.example.com. 3600 IN NS ns2.example.com."}},
		{name: "apex NODATA", qname: "dc.example.com.", qtype: dns.TypeA, aa: true, ns: []string{soa}},
		{name: "ANY is one RRset", qname: "web1.inst.owner.dc.example.com.", qtype: dns.TypeANY, aa: true,
			answer: []string{"web1.inst.owner.dc.example.com. 30 IN A 10.0.0.1"}},
		{name: "CNAME chased", qname: "aaaaaaaa.cmon.dc.example.com.", qtype: dns.TypeA, aa: true,
			answer: []string{"aaaaaaaa.cmon.dc.example.com. 30 IN CNAME cmon.dc.example.com.", "cmon.dc.example.com. 30 IN A 10.0.0.9"}},
		{name: "CNAME asked for", qname: "aaaaaaaa.cmon.dc.example.com.", qtype: dns.TypeCNAME, aa: true,
			answer: []string{"aaaaaaaa.cmon.dc.example.com. 30 IN CNAME cmon.dc.example.com."}},
		{name: "CNAME to NODATA", qname: "aaaaaaaa.cmon.dc.example.com.", qtype: dns.TypeTXT, aa: true,
			answer: []string{"aaaaaaaa.cmon.dc.example.com. 30 IN CNAME cmon.dc.example.com."}, ns: []string{soa}},
		{name: "CNAME out of zone", qname: "out.dc.example.com.", qtype: dns.TypeA, aa: true,
			answer: []string{"out.dc.example.com. 30 IN CNAME elsewhere.example.org."}},
		{name: "CNAME to NXDOMAIN", qname: "dangling.dc.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, aa: true,
			answer: []string{"dangling.dc.example.com. 30 IN CNAME nothing.dc.example.com."}, ns: []string{soa}},
		{name: "reverse", qname: "1.0.0.10.in-addr.arpa.", qtype: dns.TypePTR, aa: true,
			answer: []string{"1.0.0.10.in-addr.arpa. 30 IN PTR web1.inst.owner.dc.example.com."}},
		{name: "outside every zone", qname: "www.example.org.", qtype: dns.TypeA, rcode: dns.RcodeRefused},
		{name: "label boundary", qname: "xdc.example.com.", qtype: dns.TypeA, rcode: dns.RcodeRefused},
		{name: "reverse zone that does not exist", qname: "1.9.9.10.in-addr.arpa.", qtype: dns.TypePTR, rcode: dns.RcodeRefused},
	}
	for _, warm := range []bool{false, true} {
		_, addr := startServer(t, testStore(t), warm)
		for _, tc := range cases {
			for _, proto := range []string{"udp", "tcp"} {
				m := new(dns.Msg)
				m.SetQuestion(tc.qname, tc.qtype)
				m.SetEdns0(4096, false)
				r := exchange(t, addr, proto, m)
				where := tc.name + " (" + proto + map[bool]string{true: ", warm)", false: ", cold)"}[warm]
				if r.Rcode != tc.rcode || r.Authoritative != tc.aa {
					t.Errorf("%s: rcode %s aa %v, want %s aa %v", where, dns.RcodeToString[r.Rcode], r.Authoritative, dns.RcodeToString[tc.rcode], tc.aa)
				}
				if !r.RecursionDesired || r.RecursionAvailable {
					t.Errorf("%s: RD not echoed or RA set", where)
				}
				if got := render(r.Answer); !matchRRs(got, tc.answer) {
					t.Errorf("%s: answer\n got %q\nwant %q", where, got, tc.answer)
				}
				got := render(r.Ns)
				if len(got) != len(tc.ns) {
					t.Errorf("%s: authority %q, want %q", where, got, tc.ns)
				}
				for i := range min(len(got), len(tc.ns)) {
					if !strings.HasPrefix(got[i], tc.ns[i]) {
						t.Errorf("%s: authority %q, want prefix %q", where, got[i], tc.ns[i])
					}
				}
				var extra []dns.RR
				for _, rr := range r.Extra {
					if rr.Header().Rrtype != dns.TypeOPT {
						extra = append(extra, rr)
					}
				}
				if got := render(extra); !slices.Equal(got, tc.extra) {
					t.Errorf("%s: additional\n got %q\nwant %q", where, got, tc.extra)
				}
				if r.IsEdns0() == nil {
					t.Errorf("%s: no OPT in the answer to an EDNS query", where)
				}
			}
		}
	}
}

// Ensure a CNAME loop ends: the chain is cut after maxCNAMEs hops.
func TestCNAMELoop(t *testing.T) {
	_, addr := startServer(t, testStore(t), true)
	m := new(dns.Msg)
	m.SetQuestion("loop1.dc.example.com.", dns.TypeA)
	r := exchange(t, addr, "udp", m)
	if len(r.Answer) != maxCNAMEs || r.Rcode != dns.RcodeSuccess {
		t.Errorf("loop: %d answers rcode %s", len(r.Answer), dns.RcodeToString[r.Rcode])
	}
}

// Ensure protocol edge cases get the answers NSD and Knot give.
func TestProtocolEdges(t *testing.T) {
	_, addr := startServer(t, testStore(t), true)

	// No EDNS: no OPT, 512-byte limit.
	m := new(dns.Msg)
	m.SetQuestion("web1.inst.owner.dc.example.com.", dns.TypeA)
	if r := exchange(t, addr, "udp", m); r.IsEdns0() != nil || len(r.Answer) != 1 {
		t.Errorf("plain query: OPT %v, %d answers", r.IsEdns0() != nil, len(r.Answer))
	}

	// EDNS version 1: BADVERS with OPT.
	m = new(dns.Msg)
	m.SetQuestion("web1.inst.owner.dc.example.com.", dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().SetVersion(1)
	if r := exchange(t, addr, "udp", m); r.Rcode != dns.RcodeBadVers || r.IsEdns0() == nil || len(r.Answer) != 0 {
		t.Errorf("EDNS v1: rcode %s", dns.RcodeToString[r.Rcode])
	}

	// Unknown opcode: NOTIMP. NOTIFY to a primary: REFUSED.
	m = new(dns.Msg)
	m.SetQuestion("dc.example.com.", dns.TypeSOA)
	m.Opcode = dns.OpcodeUpdate
	if r := exchange(t, addr, "udp", m); r.Rcode != dns.RcodeNotImplemented {
		t.Errorf("UPDATE: rcode %s", dns.RcodeToString[r.Rcode])
	}
	m.Opcode = dns.OpcodeNotify
	if r := exchange(t, addr, "udp", m); r.Rcode != dns.RcodeRefused {
		t.Errorf("NOTIFY: rcode %s", dns.RcodeToString[r.Rcode])
	}

	// CHAOS identity.
	for qname, want := range map[string]string{"version.bind.": "cns test", "id.server.": "test-host"} {
		m = new(dns.Msg)
		m.SetQuestion(qname, dns.TypeTXT)
		m.Question[0].Qclass = dns.ClassCHAOS
		r := exchange(t, addr, "udp", m)
		if len(r.Answer) != 1 || r.Answer[0].(*dns.TXT).Txt[0] != want {
			t.Errorf("%s CH TXT: %v", qname, r.Answer)
		}
	}

	// AXFR over UDP: REFUSED. IXFR over UDP: the SOA.
	m = new(dns.Msg)
	m.SetQuestion("dc.example.com.", dns.TypeAXFR)
	if r := exchange(t, addr, "udp", m); r.Rcode != dns.RcodeRefused {
		t.Errorf("AXFR/udp: rcode %s", dns.RcodeToString[r.Rcode])
	}
	m = new(dns.Msg)
	m.SetIxfr("dc.example.com.", 1, "ns1.example.com.", "hostmaster.example.com.")
	if r := exchange(t, addr, "udp", m); len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeSOA {
		t.Errorf("IXFR/udp: %v", r.Answer)
	}

	// Raw packets: garbage gets FORMERR or nothing; a response gets nothing.
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	q := new(dns.Msg)
	q.SetQuestion("web1.inst.owner.dc.example.com.", dns.TypeA)
	good, _ := q.Pack()
	for _, tc := range []struct {
		name  string
		pkt   []byte
		rcode int // -1: no answer expected
	}{
		{"short", []byte{1, 2, 3}, -1},
		{"response", func() []byte { b := append([]byte(nil), good...); b[2] |= 0x80; return b }(), -1},
		{"truncated question", good[:len(good)-3], dns.RcodeFormatError},
		{"two questions", func() []byte { b := append([]byte(nil), good...); b[5] = 2; return b }(), dns.RcodeFormatError},
		{"compressed qname", []byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12, 0, 1, 0, 1}, dns.RcodeFormatError},
	} {
		conn.Write(tc.pkt)
		conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		buf := make([]byte, 4096)
		n, err := conn.Read(buf)
		if tc.rcode < 0 {
			if err == nil {
				t.Errorf("%s: got a %d-byte answer, want none", tc.name, n)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: no answer: %v", tc.name, err)
			continue
		}
		var r dns.Msg
		if err := r.Unpack(buf[:n]); err != nil || r.Rcode != tc.rcode {
			t.Errorf("%s: rcode %d (%v), want %s", tc.name, r.Rcode, err, dns.RcodeToString[tc.rcode])
		}
	}
	// The server still answers after all that.
	if r := exchange(t, addr, "udp", q); len(r.Answer) != 1 {
		t.Error("server stopped answering after malformed input")
	}
}

// Ensure an answer too big for the client's buffer is truncated and the
// same query over TCP gets it whole.
func TestTruncation(t *testing.T) {
	d, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var recs []db.Record
	for i := range 60 {
		recs = append(recs, db.Record{Zone: zoneName, RR: mustRR(t, "big.dc.example.com. 30 IN TXT \"member-"+strings.Repeat("x", 20)+string(rune('a'+i%26))+string(rune('a'+i/26))+"\"")})
	}
	if _, err := d.Commit(&db.ChangeSet{Zones: &db.ZoneConfig{Forward: map[string]db.Apex{zoneName: testApex()}, Reverse: testApex()},
		VMs: []db.VMChange{{UUID: vmA, Records: recs}}}); err != nil {
		t.Fatal(err)
	}
	_, addr := startServer(t, d, true)
	m := new(dns.Msg)
	m.SetQuestion("big.dc.example.com.", dns.TypeTXT)
	m.SetEdns0(1232, false)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || len(r.Answer) != 0 {
		t.Errorf("UDP: TC=%v with %d answers, want TC and none", r.Truncated, len(r.Answer))
	}
	if r := exchange(t, addr, "tcp", m); r.Truncated || len(r.Answer) != 60 {
		t.Errorf("TCP: TC=%v with %d answers, want 60", r.Truncated, len(r.Answer))
	}
}

// Ensure several queries on one TCP connection are all answered, in order.
func TestTCPPipelining(t *testing.T) {
	_, addr := startServer(t, testStore(t), true)
	conn, err := dns.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	names := []string{"web1.inst.owner.dc.example.com.", "web2.inst.owner.dc.example.com.", "web.svc.owner.dc.example.com."}
	for i, n := range names {
		m := new(dns.Msg)
		m.SetQuestion(n, dns.TypeA)
		m.Id = uint16(100 + i)
		if err := conn.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range names {
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		r, err := conn.ReadMsg()
		if err != nil || r.Id != uint16(100+i) || len(r.Answer) == 0 {
			t.Fatalf("answer %d: id %d, %v", i, r.Id, err)
		}
	}
}

// Ensure commits reach the served snapshot and removed names disappear,
// empty non-terminals included.
func TestCommitUpdatesAnswers(t *testing.T) {
	d := testStore(t)
	_, addr := startServer(t, d, true)
	ask := func(name string) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		return exchange(t, addr, "udp", m)
	}
	if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{{UUID: vmB, Records: []db.Record{
		{Zone: zoneName, RR: mustRR(t, "new.deep.tree.dc.example.com. 30 IN A 10.0.0.3")},
	}}}}); err != nil {
		t.Fatal(err)
	}
	if r := ask("new.deep.tree.dc.example.com."); len(r.Answer) != 1 {
		t.Fatalf("new name not served: %v", r)
	}
	if r := ask("tree.dc.example.com."); r.Rcode != dns.RcodeSuccess {
		t.Errorf("new empty non-terminal: %s", dns.RcodeToString[r.Rcode])
	}
	if r := ask("web2.inst.owner.dc.example.com."); r.Rcode != dns.RcodeNameError {
		t.Errorf("removed name: %s", dns.RcodeToString[r.Rcode])
	}
	if r := ask("web.svc.owner.dc.example.com."); len(r.Answer) != 1 {
		t.Errorf("service after member left: %v", r.Answer)
	}
	if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{{UUID: vmB, Delete: true}}}); err != nil {
		t.Fatal(err)
	}
	if r := ask("tree.dc.example.com."); r.Rcode != dns.RcodeNameError {
		t.Errorf("empty non-terminal kept after its last child went: %s", dns.RcodeToString[r.Rcode])
	}
	if r := ask("owner.dc.example.com."); r.Rcode != dns.RcodeSuccess {
		t.Errorf("empty non-terminal with children left: %s", dns.RcodeToString[r.Rcode])
	}
}

// Ensure one client cannot hold every TCP slot, a silent connection is
// closed after the idle timeout, and others are served meanwhile.
func TestTCPLimits(t *testing.T) {
	s, err := New(Config{Listen: []string{"127.0.0.1:0"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxTCPConnsPerIP: 8, TCPIdleTimeout: 2 * time.Second}, testStore(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, tcp := s.Addrs()
	var held []net.Conn
	for range 20 {
		c, err := net.Dial("tcp", tcp[0])
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// Connections past the per-address limit are closed at once.
	closed := 0
	for _, c := range held {
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			closed++
		}
	}
	if closed != 12 {
		t.Errorf("%d of 20 connections closed at once, want 12 (limit 8)", closed)
	}
	// Another address is served.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.3.0.1")}, Timeout: time.Second}
	nc, err := d.Dial("tcp", tcp[0])
	if err != nil {
		t.Skip("cannot bind 127.3.0.1:", err)
	}
	conn := &dns.Conn{Conn: nc}
	m := new(dns.Msg)
	m.SetQuestion("web1.inst.owner.dc.example.com.", dns.TypeA)
	conn.WriteMsg(m)
	if r, err := conn.ReadMsg(); err != nil || len(r.Answer) != 1 {
		t.Errorf("other client: %v %v", r, err)
	}
	// The silent ones are dropped after the idle timeout.
	c := held[0]
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle connection: %v, want EOF", err)
	}
}

// Ensure the default dns_listen shape, both wildcards on one port
// (0.0.0.0:53 and [::]:53), binds: each address gets sockets of its own
// family, and both answer over UDP and TCP. (Bound on the wildcards,
// queried on loopback only.)
func TestListenBothWildcards(t *testing.T) {
	port := freeWildcardPort(t)
	s, err := New(Config{Listen: []string{fmt.Sprintf("0.0.0.0:%d", port), fmt.Sprintf("[::]:%d", port)},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, testStore(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatalf("listening on both wildcards of port %d: %v", port, err)
	}
	t.Cleanup(func() { s.Close() })
	for _, host := range []string{"127.0.0.1", "::1"} {
		for _, proto := range []string{"udp", "tcp"} {
			m := new(dns.Msg)
			m.SetQuestion(zoneName+".", dns.TypeSOA)
			if r := exchange(t, net.JoinHostPort(host, fmt.Sprint(port)), proto, m); len(r.Answer) != 1 {
				t.Errorf("SOA over %s to %s: %v", proto, host, r)
			}
		}
	}
}

// freeWildcardPort finds a port free on both wildcards for UDP and TCP.
// It looks below the ephemeral range (32768 and up on Linux), where the
// ":0" listeners of tests running alongside take their ports.
func freeWildcardPort(t *testing.T) int {
	t.Helper()
	for port := 20000 + os.Getpid()%5000; port < 32000; port++ {
		var open []io.Closer
		free := true
		for _, network := range []string{"udp4", "udp6", "tcp4", "tcp6"} {
			addr := fmt.Sprintf("0.0.0.0:%d", port)
			if strings.HasSuffix(network, "6") {
				addr = fmt.Sprintf("[::]:%d", port)
			}
			var c io.Closer
			var err error
			if strings.HasPrefix(network, "udp") {
				c, err = net.ListenPacket(network, addr)
			} else {
				c, err = net.Listen(network, addr)
			}
			if err != nil {
				free = false
				break
			}
			open = append(open, c)
		}
		for _, c := range open {
			c.Close()
		}
		if free {
			return port
		}
	}
	t.Fatal("no port free on both wildcards below 32000")
	return 0
}
