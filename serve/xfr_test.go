package serve

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/serve/policy"
)

var testKey = policy.Key{Name: "xfr-key", Algorithm: "hmac-sha256", Secret: base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))}

// xfrServer serves a store whose zone has n names, with access.
func xfrServer(t *testing.T, n int, a Access) (*Server, *db.DB, string) {
	t.Helper()
	d, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	var recs []db.Record
	for i := range n {
		recs = append(recs, db.Record{Zone: zoneName, RR: mustRR(t, fmt.Sprintf("h%d.inst.o.dc.example.com. 30 IN A 10.1.%d.%d", i, i>>8, i&255))},
			db.Record{Zone: zoneName, RR: mustRR(t, fmt.Sprintf(`h%d.inst.o.dc.example.com. 30 IN TXT "vm %d"`, i, i))})
	}
	if _, err := d.Commit(&db.ChangeSet{Zones: &db.ZoneConfig{Forward: map[string]db.Apex{zoneName: testApex()}, Reverse: testApex()},
		VMs: []db.VMChange{{UUID: vmA, Records: recs}}}); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Listen: []string{"127.0.0.1:0"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Access: a}, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	_, tcp := s.Addrs()
	return s, d, tcp[0]
}

// transfer runs an AXFR or IXFR with miekg/dns's client from local (an
// address on lo such as 127.0.0.2) and returns the records or the error.
func transfer(t *testing.T, addr, local string, m *dns.Msg, key *policy.Key) ([]dns.RR, error) {
	t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tr := &dns.Transfer{Conn: &dns.Conn{Conn: nc}}
	if key != nil {
		tr.TsigSecret = map[string]string{dns.Fqdn(key.Name): key.Secret}
		m.SetTsig(dns.Fqdn(key.Name), dns.HmacSHA256, 300, time.Now().Unix())
	}
	ch, err := tr.In(m, addr)
	if err != nil {
		return nil, err
	}
	var out []dns.RR
	for env := range ch {
		if env.Error != nil {
			return out, env.Error
		}
		out = append(out, env.RR...)
	}
	return out, nil
}

func axfrMsg() *dns.Msg {
	m := new(dns.Msg)
	m.SetAxfr(zoneName + ".")
	return m
}

func ixfrMsg(serial uint32) *dns.Msg {
	m := new(dns.Msg)
	m.SetIxfr(zoneName+".", serial, "ns1.example.com.", "hostmaster.example.com.")
	return m
}

// Ensure an AXFR of a zone spanning several messages carries every record
// once, SOA first and last, NS after the SOA.
func TestAXFR(t *testing.T) {
	s, _, addr := xfrServer(t, 3000, Access{AllowTransfer: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	// Cold, the zone comes from the store in chunks: many of them here.
	defer func(c int) { coldChunk = c }(coldChunk)
	coldChunk = 4 << 10
	for _, warm := range []bool{false, true} {
		if warm {
			s.Warm()
		}
		rrs, err := transfer(t, addr, "127.0.0.1", axfrMsg(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if cold := s.zoneByName(zoneName).names == nil; cold == warm {
			t.Errorf("warm=%v: zone cold after the AXFR: %v", warm, cold)
		}
		if len(rrs) != 2+2+6000 {
			t.Fatalf("warm=%v: %d records, want %d", warm, len(rrs), 2+2+6000)
		}
		if rrs[0].Header().Rrtype != dns.TypeSOA || rrs[len(rrs)-1].Header().Rrtype != dns.TypeSOA || rrs[1].Header().Rrtype != dns.TypeNS {
			t.Errorf("warm=%v: order %s, %s ... %s", warm, rrs[0], rrs[1], rrs[len(rrs)-1])
		}
		seen := map[string]bool{}
		for _, rr := range rrs[1 : len(rrs)-1] {
			k := rr.String()
			if seen[k] {
				t.Errorf("duplicate %s", k)
			}
			seen[k] = true
		}
	}
}

// Ensure IXFR sends the journal's difference, a single SOA to an up to
// date client, and the whole zone for a serial the journal lacks.
func TestIXFR(t *testing.T) {
	t.Run("warm", func(t *testing.T) { testIXFR(t, true) })
	// Just after a restart: IXFR and the up-to-date SOA come from the
	// journal without loading the zone; only the AXFR fallback loads it.
	t.Run("cold", func(t *testing.T) { testIXFR(t, false) })
}

func testIXFR(t *testing.T, warm bool) {
	s, d, addr := xfrServer(t, 50, Access{AllowTransfer: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if warm {
		s.Warm()
	}
	// A fresh db's journal starts an IXFR once its serials are checked
	// (serialcheck.go): with no secondary to ask, at the first round.
	runServer(t, s)
	waitUntil(t, func() bool { why, _ := d.SerialsUnverified(); return why == "" }, "serials verified")
	z := s.zoneByName(zoneName)
	old := z.serial
	// Move h7 (its A record deleted, another added) and add a name: one
	// commit.
	var moved []db.Record
	for i := range 50 {
		a := fmt.Sprintf("h%d.inst.o.dc.example.com. 30 IN A 10.1.%d.%d", i, i>>8, i&255)
		if i == 7 {
			a = "h7.inst.o.dc.example.com. 30 IN A 10.9.7.7"
		}
		moved = append(moved, db.Record{Zone: zoneName, RR: mustRR(t, a)},
			db.Record{Zone: zoneName, RR: mustRR(t, fmt.Sprintf(`h%d.inst.o.dc.example.com. 30 IN TXT "vm %d"`, i, i))})
	}
	if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{{UUID: vmA, Records: moved}, {UUID: vmB, Records: []db.Record{
		{Zone: zoneName, RR: mustRR(t, "new.inst.o.dc.example.com. 30 IN A 10.9.9.9")},
	}}}}); err != nil {
		t.Fatal(err)
	}
	cur := s.zoneByName(zoneName).serial
	rrs, err := transfer(t, addr, "", ixfrMsg(old), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, rr := range rrs {
		got = append(got, strings.ReplaceAll(rr.String(), "\t", " "))
	}
	want := []string{
		fmt.Sprintf("dc.example.com. 30 IN SOA ns1.example.com. hostmaster.example.com. %d 30 60 2592000 30", cur),
		fmt.Sprintf("dc.example.com. 30 IN SOA ns1.example.com. hostmaster.example.com. %d 30 60 2592000 30", old),
		"h7.inst.o.dc.example.com. 30 IN A 10.1.0.7",
		fmt.Sprintf("dc.example.com. 30 IN SOA ns1.example.com. hostmaster.example.com. %d 30 60 2592000 30", cur),
		"h7.inst.o.dc.example.com. 30 IN A 10.9.7.7",
		"new.inst.o.dc.example.com. 30 IN A 10.9.9.9",
		fmt.Sprintf("dc.example.com. 30 IN SOA ns1.example.com. hostmaster.example.com. %d 30 60 2592000 30", cur),
	}
	if !slices.Equal(got, want) {
		t.Errorf("IXFR:\n got %q\nwant %q", got, want)
	}

	rrs, err = transfer(t, addr, "", ixfrMsg(cur), nil)
	if err != nil || len(rrs) != 1 || rrs[0].(*dns.SOA).Serial != cur {
		t.Errorf("IXFR from the current serial: %v %v, want the single SOA", rrs, err)
	}
	// Over UDP a small difference fits one datagram.
	m := ixfrMsg(old)
	r, _, err := (&dns.Client{Net: "udp"}).Exchange(m, addr)
	if err != nil || len(r.Answer) != 7 {
		t.Errorf("IXFR over UDP: %v %v", r, err)
	}
	if cold := s.zoneByName(zoneName).names == nil; cold == warm {
		t.Errorf("zone cold after IXFRs: %v, want %v", cold, !warm)
	}

	rrs, err = transfer(t, addr, "", ixfrMsg(old-1000), nil)
	if err != nil || len(rrs) != 2+2+101 {
		t.Errorf("IXFR from an unknown serial: %d records (%v), want the whole zone (105)", len(rrs), err)
	}
	if cold := s.zoneByName(zoneName).names == nil; cold == warm {
		t.Errorf("zone cold after an AXFR: %v, want %v (a cold zone's AXFR is sent from the store)", cold, !warm)
	}
}

// Ensure addresses outside the ACL are refused and never get a record, and
// a peer bound to a key must sign with it.
func TestTransferACLAndTSIG(t *testing.T) {
	peer := netip.MustParseAddr("127.0.0.3")
	a := Access{
		AllowTransfer: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Zones:         map[string]ZoneAccess{zoneName: {Peers: []netip.Addr{peer}}},
		Keys:          []policy.Key{testKey},
		PeerKeys:      map[netip.Addr]string{peer: "xfr-key"},
	}
	_, _, addr := xfrServer(t, 10, a)

	if rrs, err := transfer(t, addr, "127.0.0.2", axfrMsg(), nil); err == nil || len(rrs) != 0 {
		t.Errorf("unlisted client got %d records (err %v)", len(rrs), err)
	}
	if rrs, err := transfer(t, addr, "127.0.0.3", axfrMsg(), nil); err == nil || len(rrs) != 0 {
		t.Errorf("key-bound peer without signature got %d records (err %v)", len(rrs), err)
	}
	bad := testKey
	bad.Secret = base64.StdEncoding.EncodeToString([]byte("wrong secret, wrong secret......"))
	if rrs, err := transfer(t, addr, "127.0.0.3", axfrMsg(), &bad); err == nil || len(rrs) != 0 {
		t.Errorf("bad signature got %d records (err %v)", len(rrs), err)
	}
	// Signed correctly: the whole zone, every message verified by miekg.
	rrs, err := transfer(t, addr, "127.0.0.3", axfrMsg(), &testKey)
	if err != nil || len(rrs) != 2+2+20 {
		t.Errorf("signed AXFR: %d records, %v", len(rrs), err)
	}
	// A signed SOA query is answered signed.
	m := new(dns.Msg)
	m.SetQuestion(zoneName+".", dns.TypeSOA)
	m.SetTsig("xfr-key.", dns.HmacSHA256, 300, time.Now().Unix())
	c := &dns.Client{TsigSecret: map[string]string{"xfr-key.": testKey.Secret}}
	if r, _, err := c.Exchange(m, addr); err != nil || len(r.Answer) != 1 || r.IsTsig() == nil {
		t.Errorf("signed SOA query: %v %v", r, err)
	}
}

// Ensure the signer produces what miekg/dns verifies, for first and
// following messages of a transfer.
func TestTSIGSignVerifies(t *testing.T) {
	k, err := newTSIGKey(testKey)
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	m.SetQuestion("a.example.", dns.TypeA)
	m.Response = true
	raw, _ := m.Pack()
	now := time.Now()
	signed, mac := k.sign(raw, nil, false, now)
	if err := dns.TsigVerify(signed, testKey.Secret, "", false); err != nil {
		t.Fatalf("first message: %v", err)
	}
	raw2, _ := m.Pack()
	signed2, _ := k.sign(raw2, mac, true, now)
	if err := dns.TsigVerify(signed2, testKey.Secret, fmt.Sprintf("%x", mac), true); err != nil {
		t.Fatalf("timers-only message: %v", err)
	}
	if _, err := newTSIGKey(policy.Key{Name: "k", Algorithm: "hmac-md5", Secret: testKey.Secret}); err == nil {
		t.Error("hmac-md5 accepted")
	}
	if _, err := newTSIGKey(policy.Key{Name: "k", Secret: "not base64!"}); err == nil {
		t.Error("bad secret accepted")
	}
}

// notifyListener records the NOTIFYs it receives and answers the first
// `silent` of them not at all, the rest with rcode.
type notifyListener struct {
	conn   *net.UDPConn
	got    chan *dns.Msg
	silent int
	rcode  int
}

func listenNotify(t *testing.T, silent, rcode int) *notifyListener {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	l := &notifyListener{conn: c, got: make(chan *dns.Msg, 100), silent: silent, rcode: rcode}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			var m dns.Msg
			if m.Unpack(buf[:n]) != nil || m.Opcode != dns.OpcodeNotify {
				continue // propagation's SOA polls are not what this records
			}
			l.got <- &m
			if l.silent > 0 {
				l.silent--
				continue
			}
			r := new(dns.Msg)
			r.SetRcode(&m, l.rcode)
			b, _ := r.Pack()
			c.WriteToUDP(b, from)
		}
	}()
	t.Cleanup(func() { c.Close() })
	return l
}

func (l *notifyListener) addr() netip.AddrPort { return l.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

func (l *notifyListener) next(t *testing.T, within time.Duration) *dns.Msg {
	t.Helper()
	select {
	case m := <-l.got:
		return m
	case <-time.After(within):
		t.Fatal("no NOTIFY arrived")
		return nil
	}
}

// Ensure a commit sends a NOTIFY carrying the new SOA, a silent peer gets
// retransmissions, and a burst of commits is coalesced.
func TestNotify(t *testing.T) {
	quiet := listenNotify(t, 0, dns.RcodeSuccess)
	deaf := listenNotify(t, 2, dns.RcodeSuccess)
	a := Access{Zones: map[string]ZoneAccess{zoneName: {Notify: []netip.AddrPort{quiet.addr(), deaf.addr()}}}, MinNotifyInterval: 300 * time.Millisecond}
	s, d, _ := xfrServer(t, 5, a)
	runServer(t, s)

	commit := func(ip string) uint32 {
		if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{{UUID: vmB, Records: []db.Record{
			{Zone: zoneName, RR: mustRR(t, "n.dc.example.com. 30 IN A "+ip)},
		}}}}); err != nil {
			t.Fatal(err)
		}
		return s.zoneByName(zoneName).serial
	}
	serial := commit("10.0.0.1")
	m := quiet.next(t, 2*time.Second)
	if m.Opcode != dns.OpcodeNotify || len(m.Answer) != 1 || m.Answer[0].(*dns.SOA).Serial != serial {
		t.Fatalf("NOTIFY: %v", m)
	}
	// The deaf peer is retried until it answers (it ignores two).
	for i := 0; i < 3; i++ {
		if m := deaf.next(t, 5*time.Second); m.Answer[0].(*dns.SOA).Serial != serial {
			t.Fatalf("retry %d announced %v", i, m.Answer)
		}
	}

	// A burst of five commits: one NOTIFY now or soon, then one for the last.
	var last uint32
	for i := 2; i < 7; i++ {
		last = commit(fmt.Sprintf("10.0.0.%d", i))
	}
	deadline := time.After(3 * time.Second)
	count := 0
	for {
		select {
		case m := <-quiet.got:
			count++
			if m.Answer[0].(*dns.SOA).Serial == last {
				if count > 2 {
					t.Errorf("%d NOTIFYs for a burst, want at most 2", count)
				}
				return
			}
		case <-deadline:
			t.Fatalf("the last serial %d was never announced (%d NOTIFYs)", last, count)
		}
	}
}

// A NOTIFY answered with an error (BIND and Knot answer NOTAUTH, NSD
// NXDOMAIN, for a zone they do not serve) has been answered: RFC 1996
// §4.7 retransmits only while no answer comes, so nothing more is
// scheduled for that peer until the next change. A peer that does not
// answer has its retransmission scheduled (what the check would see).
func TestNotifyErrorAnswerNotRetried(t *testing.T) {
	peers := map[string]*notifyListener{}
	var targets []netip.AddrPort
	for name, rcode := range map[string]int{"NOERROR": dns.RcodeSuccess, "NOTAUTH": dns.RcodeNotAuth,
		"REFUSED": dns.RcodeRefused, "NXDOMAIN": dns.RcodeNameError, "SERVFAIL": dns.RcodeServerFailure, "silent": -1} {
		silent := 0
		if rcode < 0 {
			silent = 1 << 30
		}
		l := listenNotify(t, silent, rcode)
		peers[name] = l
		targets = append(targets, l.addr())
	}
	s, d, _ := xfrServer(t, 5, Access{Zones: map[string]ZoneAccess{zoneName: {Notify: targets}}, MinNotifyInterval: 50 * time.Millisecond})
	runServer(t, s)
	if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{{UUID: vmB, Records: []db.Record{
		{Zone: zoneName, RR: mustRR(t, "n.dc.example.com. 30 IN A 10.0.0.1")},
	}}}}); err != nil {
		t.Fatal(err)
	}
	for _, l := range peers {
		l.next(t, 2*time.Second)
	}
	// Each answer is in once the NOTIFY is no longer in flight.
	state := func(l *notifyListener) notifyState {
		return s.notify.pending()[notifyKey{zoneName, l.addr()}]
	}
	deadline := time.Now().Add(5 * time.Second)
	for name, l := range peers {
		for name != "silent" && state(l).inFlight != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: cns never took the answer to its NOTIFY", name)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for name, l := range peers {
		st := state(l)
		switch scheduled := !st.next.IsZero(); {
		case name == "silent" && !scheduled:
			t.Errorf("the silent peer has no retransmission scheduled (%+v)", st)
		case name != "silent" && scheduled:
			t.Errorf("the peer that answered %s gets the NOTIFY again at %v (try %d): an answer, even an error, ends the retransmissions", name, st.next.Format(time.StampMilli), st.tries)
		}
	}
}

// runServer runs s's background work until the test ends, and waits for
// it to stop.
func runServer(t *testing.T, s *Server) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// Ensure a request with a bad TSIG gets NOTAUTH with the TSIG error, over
// UDP and TCP, for queries and transfers.
func TestTSIGErrorAnswered(t *testing.T) {
	_, _, addr := xfrServer(t, 3, Access{AllowTransfer: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Keys: []policy.Key{testKey}})
	wrong := base64.StdEncoding.EncodeToString([]byte("not the secret at all, not at all"))
	for _, tc := range []struct {
		net   string
		qtype uint16
		key   string
		want  uint16
	}{
		{"udp", dns.TypeSOA, "xfr-key.", dns.RcodeBadSig},
		{"tcp", dns.TypeSOA, "xfr-key.", dns.RcodeBadSig},
		{"tcp", dns.TypeAXFR, "xfr-key.", dns.RcodeBadSig},
		{"udp", dns.TypeSOA, "unknown-key.", dns.RcodeBadKey},
	} {
		m := new(dns.Msg)
		m.SetQuestion(zoneName+".", tc.qtype)
		m.SetTsig(tc.key, dns.HmacSHA256, 300, time.Now().Unix())
		c := &dns.Client{Net: tc.net, TsigSecret: map[string]string{tc.key: wrong}, Timeout: 2 * time.Second}
		r, _, err := c.Exchange(m, addr)
		if r == nil {
			t.Errorf("%s %s key %s: no answer (%v)", tc.net, dns.TypeToString[tc.qtype], tc.key, err)
			continue
		}
		if r.Rcode != dns.RcodeNotAuth || r.IsTsig() == nil || r.IsTsig().Error != tc.want || len(r.Answer) != 0 {
			t.Errorf("%s %s key %s: rcode %s tsig %v", tc.net, dns.TypeToString[tc.qtype], tc.key, dns.RcodeToString[r.Rcode], r.IsTsig())
		}
	}
}

// Ensure answering over UDP allocates nothing per datagram (recvmmsg and
// sendmmsg without per-packet addresses, answers built in place): a server
// that allocates while it answers grows its heap, and so its memory, with
// the query rate instead of the zones.
func TestUDPAnswersAllocateNothing(t *testing.T) {
	s, _, addr := xfrServer(t, 50, Access{})
	s.Warm()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := new(dns.Msg)
	m.SetQuestion("h7.inst.o.dc.example.com.", dns.TypeA)
	m.SetEdns0(1232, false)
	req, _ := m.Pack()
	buf := make([]byte, 1500)
	ask := func(n int) {
		for range n {
			if _, err := c.Write(req); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if k, err := c.Read(buf); err != nil || k < 12 {
				t.Fatalf("answer: %d bytes, %v", k, err)
			}
		}
	}
	ask(100) // buffers and the poller set up
	const queries = 5000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ask(queries)
	runtime.ReadMemStats(&after)
	// The client side (Write, Read, the deadline) allocates nothing either;
	// allow a little for the runtime and test framework.
	if n := after.Mallocs - before.Mallocs; n > queries/100 {
		t.Errorf("%d allocations for %d UDP queries, want ~0", n, queries)
	}
}

// Ensure a transfer from the store stops, rather than mixing two serials,
// when a commit lands between two of its chunks.
func TestColdAXFRCommitBetweenChunks(t *testing.T) {
	s, d, _ := xfrServer(t, 300, Access{})
	z := s.zoneByName(zoneName)
	defer func(c int) { coldChunk = c }(coldChunk)
	coldChunk = 1 << 10
	names := &storedNames{store: d, zone: zoneName, serial: z.serial}
	if more, err := names.next(); !more || err != nil || names.done {
		t.Fatalf("first chunk: more=%v done=%v err=%v, want more to come", more, names.done, err)
	}
	if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{{UUID: vmA, Records: []db.Record{
		{Zone: zoneName, RR: mustRR(t, "h1.inst.o.dc.example.com. 30 IN A 10.9.9.9")}}}}}); err != nil {
		t.Fatal(err)
	}
	if more, err := names.next(); more || !errors.Is(err, errZoneChanged) {
		t.Errorf("chunk after a commit: more=%v err=%v, want errZoneChanged", more, err)
	}
}
