package serve

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/serve/policy"
)

// testClock is the peer and NOTIFY clock: it runs, and the test moves it
// ahead.
type testClock struct {
	mu    sync.Mutex
	ahead time.Duration // of the real clock
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.ahead)
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.ahead += d
	c.mu.Unlock()
}

// learnPeer is a secondary on 127.0.0.2 whose answers the test turns on
// and off: the SOA (cns's current serial, authoritative; else REFUSED),
// NOTIFYs (else silence) and its version (else silence).
type learnPeer struct {
	conn                 *net.UDPConn
	soa, notify, version atomic.Bool
	versionQueries       atomic.Int32
	notifies             chan uint32 // the serial of every NOTIFY received
}

func startLearnPeer(t *testing.T, serial func() uint32) *learnPeer {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	f := &learnPeer{conn: c, notifies: make(chan uint32, 64)}
	srv := &dns.Server{PacketConn: c, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
		r := new(dns.Msg)
		r.SetReply(m)
		q := m.Question[0]
		switch {
		case m.Opcode == dns.OpcodeNotify:
			if len(m.Answer) == 1 {
				f.notifies <- m.Answer[0].(*dns.SOA).Serial
			}
			if !f.notify.Load() {
				return
			}
		case q.Qtype == dns.TypeSOA && f.soa.Load():
			r.Authoritative = true
			apex := testApex()
			r.Answer = []dns.RR{apex.SOA(zoneName, serial())}
		case q.Qtype == dns.TypeSOA:
			r.Rcode = dns.RcodeRefused
		case q.Qtype == dns.TypeTXT && q.Qclass == dns.ClassCHAOS:
			f.versionQueries.Add(1)
			if !f.version.Load() {
				return
			}
			r.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassCHAOS}, Txt: []string{"fake 1.0"}}}
		default:
			return
		}
		w.WriteMsg(r)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return f
}

func (f *learnPeer) port() uint16 { return f.conn.LocalAddr().(*net.UDPAddr).AddrPort().Port() }

// nextNotify waits for the next NOTIFY the peer receives.
func (f *learnPeer) nextNotify(t *testing.T) uint32 {
	t.Helper()
	select {
	case serial := <-f.notifies:
		return serial
	case <-time.After(5 * time.Second):
		t.Fatal("no NOTIFY arrived")
		return 0
	}
}

// learnServer serves testStore with 127.0.0.1 alone taken for loopback,
// so that 127.0.0.2 stands for a secondary elsewhere, probed and NOTIFYed
// at the learnPeer's port, on the test's clock.
func learnServer(t *testing.T) (*Server, *db.DB, *learnPeer, *testClock) {
	t.Helper()
	d := testStore(t)
	s, err := New(Config{Listen: []string{"127.0.0.1:0"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Access: Access{AllowTransfer: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, MinNotifyInterval: time.Millisecond}}, d)
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{}
	f := startLearnPeer(t, func() uint32 { serial, _ := s.ZoneSerial(zoneName); return serial })
	s.now = clock.Now
	s.peers.local = func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.1") }
	s.peers.port = f.port()
	s.peers.probeDelay = time.Millisecond
	s.peers.probeTimeout = 200 * time.Millisecond
	s.prop.policy = normalPropagation(policy.Propagation{PollDelay: 5 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	runServer(t, s)
	return s, d, f, clock
}

// record returns the tracker's record of addr, peer or not.
func record(s *Server, addr netip.Addr) (Peer, bool) {
	s.peers.mu.Lock()
	defer s.peers.mu.Unlock()
	p := s.peers.peers[addr]
	if p == nil {
		return Peer{}, false
	}
	return p.clone(), true
}

// waitRecord waits until addr's record satisfies ok.
func waitRecord(t *testing.T, s *Server, addr netip.Addr, what string, ok func(Peer) bool) Peer {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		ch := s.PeersChanged()
		if p, found := record(s, addr); found && ok(p) {
			return p
		}
		select {
		case <-ch:
		case <-deadline:
			p, _ := record(s, addr)
			t.Fatalf("%s: never; record %+v", what, p)
		}
	}
}

// probesDone waits until no probe is queued or running.
func probesDone(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.peers.mu.Lock()
		n := len(s.peers.pending)
		s.peers.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("probes still running")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Ensure a client elsewhere becomes a peer only once it answers the SOA
// probe on port 53: before, it is neither listed, nor NOTIFYed, nor
// counted in propagation; after, it is all three.
func TestTransferringClientBecomesPeerByAnswering(t *testing.T) {
	s, d, f, clock := learnServer(t)
	addr := netip.MustParseAddr("127.0.0.2")
	_, tcp := s.Addrs()

	// A loopback client is not even recorded, nor probed.
	s.peers.transferred(netip.MustParseAddr("127.0.0.1"), zoneName, transferResult{kind: "AXFR", serial: 1})
	s.peers.mu.Lock()
	probes := len(s.peers.pending)
	s.peers.mu.Unlock()
	if _, found := record(s, netip.MustParseAddr("127.0.0.1")); found || probes != 0 {
		t.Fatalf("a loopback client was recorded or probed (%d probes)", probes)
	}

	// It transfers; its port 53 refuses the probe.
	if _, err := transfer(t, tcp[0], "127.0.0.2", axfrMsg(), nil); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, s, addr, "the unanswered probe", func(p Peer) bool { return p.ProbeFailures == 1 })
	if p, _ := record(s, addr); p.State != PeerProbing {
		t.Errorf("state %s after an unanswered probe, want probing", p.State)
	}
	if len(s.Peers()) != 0 || len(s.ZonePeers(zoneName)) != 0 {
		t.Errorf("a client that did not answer is a peer: %+v, zone peers %v", s.Peers(), s.ZonePeers(zoneName))
	}
	serial := commitOne(t, s, d, "10.0.0.7")
	if p, _ := s.Propagation(zoneName, serial); p.State != status.StateActive || len(p.Peers) != 0 {
		t.Errorf("propagation counts a client: %+v", p)
	}
	for _, n := range s.NotifyStatus() {
		t.Errorf("a client is NOTIFYed: %+v", n)
	}

	// Again a minute later (the probe's backoff); now it answers.
	f.soa.Store(true)
	f.version.Store(true)
	clock.Add(time.Minute)
	if _, err := transfer(t, tcp[0], "127.0.0.2", axfrMsg(), nil); err != nil {
		t.Fatal(err)
	}
	p := waitRecord(t, s, addr, "the peer's version", func(p Peer) bool { return p.Version != "" })
	if p.State != PeerAnswering || p.Version != "fake 1.0" {
		t.Errorf("after answering: state %s version %q, want answering, fake 1.0", p.State, p.Version)
	}
	if peers := s.Peers(); len(peers) != 1 || peers[0].Address != "127.0.0.2" || peers[0].Configured {
		t.Errorf("peers %+v, want 127.0.0.2, learned", peers)
	}
	serial = commitOne(t, s, d, "10.0.0.8")
	if got := f.nextNotify(t); got != serial {
		t.Errorf("NOTIFY of %d, want %d", got, serial)
	}
	waitFor(t, s, func(p status.Propagation) bool {
		return p.State == status.StateActive && len(p.Peers) == 1 && p.Peers[0].Target == netip.AddrPortFrom(addr, f.port())
	}, serial)
}

// Ensure a learned peer that stops answering NOTIFYs goes silent at the
// fifth unanswered one, then gets one NOTIFY per wait (1, 2, 4 ... minutes,
// capped at an hour, never given up), leaves propagation, and is
// NOTIFYed at once again when it answers. The clock is the test's.
func TestSilentPeerBacksOff(t *testing.T) {
	s, d, f, clock := learnServer(t)
	addr := netip.MustParseAddr("127.0.0.2")
	_, tcp := s.Addrs()
	f.soa.Store(true)
	f.version.Store(true)
	if _, err := transfer(t, tcp[0], "127.0.0.2", axfrMsg(), nil); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, s, addr, "a peer", func(p Peer) bool { return p.State == PeerAnswering })

	// It stops answering: the NOTIFY and its retransmissions (each due a
	// little later on the test's clock) go unanswered.
	serial := commitOne(t, s, d, "10.0.0.7")
	for i := 1; i <= peerSilentAfter; i++ {
		if got := f.nextNotify(t); got != serial {
			t.Fatalf("NOTIFY %d of %d, want %d", i, got, serial)
		}
		clock.Add(notifyMaxRetry)
		s.notify.poke()
		// (its retransmission may have come due on its own: as many
		// failures as NOTIFYs either way)
		waitRecord(t, s, addr, "an unanswered NOTIFY", func(p Peer) bool { return p.NotifyFailures >= i })
	}
	p := waitRecord(t, s, addr, "silence", func(p Peer) bool { return p.State == PeerSilent })
	if p.NotifyFailures != peerSilentAfter || len(f.notifies) != 0 {
		t.Fatalf("silent after %d unanswered, %d more NOTIFYs; want %d, none", p.NotifyFailures, len(f.notifies), peerSilentAfter)
	}
	if got := s.ZonePeers(zoneName); len(got) != 0 {
		t.Errorf("a silent peer is expected to serve the zone: %v", got)
	}
	if peers := s.Peers(); len(peers) != 1 || peers[0].State != PeerSilent {
		t.Errorf("a silent peer is still listed, as silent: %+v", peers)
	}

	// Each change now waits for the peer's backoff, which doubles from a
	// minute and stops at an hour.
	waits := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}
	for i, wait := range waits {
		failedAt := p.NotifyFailedAt
		serial = commitOne(t, s, d, fmt.Sprintf("10.0.1.%d", i+1))
		if prop, _ := s.Propagation(zoneName, serial); len(prop.Peers) != 0 {
			t.Errorf("a silent peer is counted in propagation: %+v", prop)
		}
		s.notify.mu.Lock()
		st := s.notify.targets[notifyKey{zoneName, netip.AddrPortFrom(addr, f.port())}]
		next := st.next
		s.notify.mu.Unlock()
		if !next.Equal(failedAt.Add(wait)) {
			t.Fatalf("after %d unanswered: next NOTIFY %v after the last failure, want %v", p.NotifyFailures, next.Sub(failedAt), wait)
		}
		clock.Add(next.Sub(clock.Now()))
		s.notify.poke()
		if got := f.nextNotify(t); got != serial {
			t.Fatalf("NOTIFY of %d, want %d", got, serial)
		}
		clock.Add(notifyMaxRetry)
		s.notify.poke()
		want := p.NotifyFailures + 1
		p = waitRecord(t, s, addr, "the single NOTIFY unanswered", func(p Peer) bool { return p.NotifyFailures == want })
	}
	select {
	case got := <-f.notifies:
		t.Fatalf("a silent peer got a second NOTIFY (%d) within its backoff", got)
	default:
	}

	// It answers again: back to answering, NOTIFYed at once.
	f.notify.Store(true)
	serial = commitOne(t, s, d, "10.0.2.1")
	clock.Add(time.Hour)
	s.notify.poke()
	if got := f.nextNotify(t); got != serial {
		t.Fatalf("NOTIFY of %d, want %d", got, serial)
	}
	waitRecord(t, s, addr, "answering again", func(p Peer) bool { return p.State == PeerAnswering && p.NotifyFailures == 0 })
	serial = commitOne(t, s, d, "10.0.2.2")
	if got := f.nextNotify(t); got != serial {
		t.Fatalf("NOTIFY of %d, want %d", got, serial)
	}
	waitFor(t, s, func(p status.Propagation) bool { return p.State == status.StateActive && len(p.Peers) == 1 }, serial)
}

// Ensure a version probe that gets no answer is not taken for "unknown"
// for an hour: it is asked again after a minute, at the next transfer.
func TestPeerVersionRetried(t *testing.T) {
	s, _, f, clock := learnServer(t)
	addr := netip.MustParseAddr("127.0.0.2")
	_, tcp := s.Addrs()
	f.soa.Store(true)
	if _, err := transfer(t, tcp[0], "127.0.0.2", axfrMsg(), nil); err != nil {
		t.Fatal(err)
	}
	p := waitRecord(t, s, addr, "the unanswered version probe", func(p Peer) bool { return p.VersionFailures == 1 })
	if p.Version != "" || !p.VersionAt.IsZero() {
		t.Errorf("an unanswered version probe recorded a version: %+v", p)
	}

	// It answers now; a transfer within the minute does not ask again.
	f.version.Store(true)
	asked := f.versionQueries.Load()
	clock.Add(30 * time.Second)
	if _, err := transfer(t, tcp[0], "127.0.0.2", axfrMsg(), nil); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, s, addr, "the second probe", func(p Peer) bool { return p.Counters["axfr"] == 2 })
	probesDone(t, s)
	if n := f.versionQueries.Load(); n != asked {
		t.Errorf("version asked again within the backoff (%d queries, was %d)", n, asked)
	}
	clock.Add(30 * time.Second)
	if _, err := transfer(t, tcp[0], "127.0.0.2", axfrMsg(), nil); err != nil {
		t.Fatal(err)
	}
	p = waitRecord(t, s, addr, "the version", func(p Peer) bool { return p.Version != "" })
	if p.Version != "fake 1.0" || p.VersionFailures != 0 {
		t.Errorf("version %q, failures %d", p.Version, p.VersionFailures)
	}
}
