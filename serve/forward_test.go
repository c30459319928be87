package serve

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/serve/policy"
)

// upstream is a second server on loopback, authoritative for
// upstream.example: the resolver cns forwards to in these tests.
func upstream(t *testing.T) (*Server, netip.AddrPort) {
	t.Helper()
	d, err := db.Open(filepath.Join(t.TempDir(), "up.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	const z = "upstream.example"
	recs := []db.Record{{Zone: z, RR: mustRR(t, "www.upstream.example. 60 IN A 192.0.2.80")}}
	for i := range 40 {
		recs = append(recs, db.Record{Zone: z, RR: mustRR(t, fmt.Sprintf(`big.upstream.example. 60 IN TXT "%s-%02d"`, strings.Repeat("x", 50), i))})
	}
	apex := testApex()
	apex.Minimum = 45
	if _, err := d.Commit(&db.ChangeSet{Zones: &db.ZoneConfig{Forward: map[string]db.Apex{z: apex}, Reverse: apex},
		VMs: []db.VMChange{{UUID: vmA, Records: recs}}}); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Listen: []string{"127.0.0.1:0"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	udp, _ := s.Addrs()
	return s, netip.MustParseAddrPort(udp[0])
}

// forwardingServer serves the test zone and forwards for 127.0.0.0/16.
func forwardingServer(t *testing.T, ups ...netip.AddrPort) (*Server, string) {
	t.Helper()
	s, err := New(Config{Listen: []string{"127.0.0.1:0"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Forwarding: policy.Forwarding{Clients: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/16")}, Upstreams: ups, Timeout: 500 * time.Millisecond}},
		testStore(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	runServer(t, s)
	udp, _ := s.Addrs()
	return s, udp[0]
}

func askFrom(t *testing.T, local, addr, net string, name string, qtype uint16, rd bool) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = rd
	m.SetEdns0(1232, false)
	c := &dns.Client{Net: net, Timeout: 3 * time.Second}
	if local != "" {
		if net == "tcp" {
			c.Dialer = netDialer{local: local}.dialer()
		} else {
			c.Dialer = netDialer{local: local, udp: true}.dialer()
		}
	}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s from %s: %v", name, dns.TypeToString[qtype], local, err)
	}
	return r
}

type netDialer struct {
	local string
	udp   bool
}

func (d netDialer) dialer() *net.Dialer {
	if d.udp {
		return &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(d.local)}}
	}
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(d.local)}}
}

// Clients in the list get upstream answers (RA, no AA), cached; others and
// queries without RD get REFUSED; the zone cns serves is still answered
// authoritatively.
func TestForwarding(t *testing.T) {
	up, upAddr := upstream(t)
	s, addr := forwardingServer(t, upAddr)

	r := askFrom(t, "", addr, "udp", "www.upstream.example.", dns.TypeA, true)
	if len(r.Answer) != 1 || r.Authoritative || !r.RecursionAvailable || r.Rcode != dns.RcodeSuccess {
		t.Fatalf("forwarded answer: %v", r)
	}
	if r := askFrom(t, "127.5.0.1", addr, "udp", "www.upstream.example.", dns.TypeA, true); r.Rcode != dns.RcodeRefused {
		t.Errorf("client outside the list: %s", dns.RcodeToString[r.Rcode])
	}
	if r := askFrom(t, "", addr, "udp", "www.upstream.example.", dns.TypeA, false); r.Rcode != dns.RcodeRefused {
		t.Errorf("no RD: %s", dns.RcodeToString[r.Rcode])
	}
	if r := askFrom(t, "", addr, "udp", "web1.inst.owner.dc.example.com.", dns.TypeA, true); !r.Authoritative || len(r.Answer) != 1 {
		t.Errorf("own zone: %v", r)
	}
	// NXDOMAIN from upstream, cached by the SOA minimum (45 s here).
	if r := askFrom(t, "", addr, "udp", "nope.upstream.example.", dns.TypeA, true); r.Rcode != dns.RcodeNameError {
		t.Errorf("upstream NXDOMAIN: %s", dns.RcodeToString[r.Rcode])
	}
	// A big answer: truncated upstream over UDP, fetched over TCP, given
	// whole to a TCP client and truncated to a small UDP one.
	if r := askFrom(t, "", addr, "tcp", "big.upstream.example.", dns.TypeTXT, true); len(r.Answer) != 40 {
		t.Errorf("big answer over TCP: %d records", len(r.Answer))
	}
	if r := askFrom(t, "", addr, "udp", "big.upstream.example.", dns.TypeTXT, true); !r.Truncated {
		t.Errorf("big answer over UDP not truncated: %d records", len(r.Answer))
	}

	// The upstream goes away: cached answers keep coming, with aged TTLs.
	up.Close()
	r = askFrom(t, "", addr, "udp", "www.upstream.example.", dns.TypeA, true)
	if len(r.Answer) != 1 || r.Answer[0].Header().Ttl > 60 {
		t.Errorf("cached answer: %v", r)
	}
	if r := askFrom(t, "", addr, "udp", "nope.upstream.example.", dns.TypeA, true); r.Rcode != dns.RcodeNameError {
		t.Errorf("cached NXDOMAIN: %s", dns.RcodeToString[r.Rcode])
	}
	// Something never asked before: no upstream answers, SERVFAIL.
	if r := askFrom(t, "", addr, "udp", "other.upstream.example.", dns.TypeA, true); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("all upstreams down: %s", dns.RcodeToString[r.Rcode])
	}
	st := s.ForwardStats()
	if st.Hits < 2 || st.Failures < 1 {
		t.Errorf("stats %+v", st)
	}
}

// A dead first upstream fails over to the next.
func TestForwardingFailover(t *testing.T) {
	_, upAddr := upstream(t)
	dead, err := net.ListenPacket("udp", "127.0.0.1:0") // bound, silent
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	_, addr := forwardingServer(t, netip.MustParseAddrPort(dead.LocalAddr().String()), upAddr)
	if r := askFrom(t, "", addr, "udp", "www.upstream.example.", dns.TypeA, true); len(r.Answer) != 1 {
		t.Errorf("failover: %v", r)
	}
}

// The cache's hit rate and the latency of a cached answer on a repeated
// query mix: 100 names asked 10 times each.
func TestForwardingCacheHitRate(t *testing.T) {
	_, upAddr := upstream(t)
	s, addr := forwardingServer(t, upAddr)
	c := &dns.Client{Timeout: 3 * time.Second}
	var hitTime time.Duration
	hits := 0
	for round := range 10 {
		for i := range 100 {
			m := new(dns.Msg)
			m.SetQuestion(fmt.Sprintf("n%d.upstream.example.", i), dns.TypeA)
			start := time.Now()
			if _, _, err := c.Exchange(m, addr); err != nil {
				t.Fatal(err)
			}
			if round > 0 {
				hitTime += time.Since(start)
				hits++
			}
		}
	}
	st := s.ForwardStats()
	rate := float64(st.Hits) / float64(st.Hits+st.Misses)
	if st.Misses != 100 || rate < 0.89 {
		t.Errorf("misses %d, hit rate %.2f; want 100 misses, 0.9", st.Misses, rate)
	}
	t.Logf("cache hit rate %.1f%%, mean round trip of a cached answer %v (client included)", 100*rate, hitTime/time.Duration(hits))
}
