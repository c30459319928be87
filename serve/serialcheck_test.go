package serve

import (
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/db"
)

// soaSecondary answers SOA queries with a serial it is told to hold (or
// not at all while mute) and records the serials of the NOTIFYs it gets.
type soaSecondary struct {
	conn    *net.UDPConn
	serial  atomic.Uint32
	mute    atomic.Bool
	notifys chan uint32
}

func startSOASecondary(t *testing.T, serial uint32) *soaSecondary {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	f := &soaSecondary{conn: c, notifys: make(chan uint32, 100)}
	f.serial.Store(serial)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			var m dns.Msg
			if m.Unpack(buf[:n]) != nil || len(m.Question) != 1 {
				continue
			}
			r := new(dns.Msg)
			r.SetReply(&m)
			switch {
			case m.Opcode == dns.OpcodeNotify:
				f.notifys <- m.Answer[0].(*dns.SOA).Serial
			case f.mute.Load():
				continue
			default:
				apex := testApex()
				soa := apex.SOA(zoneName, f.serial.Load())
				r.Answer = []dns.RR{soa}
			}
			b, _ := r.Pack()
			c.WriteToUDP(b, from)
		}
	}()
	t.Cleanup(func() { c.Close() })
	return f
}

func (f *soaSecondary) addr() netip.AddrPort { return f.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// nextNotify returns the serial of the next NOTIFY.
func (f *soaSecondary) nextNotify(t *testing.T, within time.Duration) uint32 {
	t.Helper()
	select {
	case s := <-f.notifys:
		return s
	case <-time.After(within):
		t.Fatal("no NOTIFY arrived")
		return 0
	}
}

// Ensure a db that was created empty (lost) continues above the serial a
// secondary holds, before announcing anything, and is then trusted.
func TestSerialCheckLostDB(t *testing.T) {
	ahead := uint32(time.Now().Unix()) + 100_000 // serials that ran ahead of the clock
	sec := startSOASecondary(t, ahead)
	a := Access{Zones: map[string]ZoneAccess{zoneName: {Notify: []netip.AddrPort{sec.addr()}}}}
	s, d, _ := xfrServer(t, 2, a)
	if why, _ := d.SerialsUnverified(); why == "" {
		t.Fatal("a fresh db is trusted")
	}
	if cur, _ := s.ZoneSerial(zoneName); !db.SerialLess(cur, ahead) {
		t.Fatalf("setup: serial %d not behind %d", cur, ahead)
	}
	runServer(t, s)
	// The first NOTIFY already carries a serial past the secondary's.
	if got := sec.nextNotify(t, 5*time.Second); got != ahead+1 {
		t.Fatalf("first NOTIFY serial %d, want %d", got, ahead+1)
	}
	if cur, _ := s.ZoneSerial(zoneName); cur != ahead+1 {
		t.Fatalf("served serial %d, want %d", cur, ahead+1)
	}
	waitUntil(t, func() bool { why, _ := d.SerialsUnverified(); return why == "" }, "serials verified")
	if probs, err := d.Check(); err != nil || len(probs) > 0 {
		t.Fatalf("check: %v %v", probs, err)
	}
}

// Ensure a secondary silent at start holds nothing up, and is passed
// once it answers with a serial ahead; and that a peer ahead shows in
// propagation status as an ERROR with the reason.
func TestSerialCheckLateAnswer(t *testing.T) {
	sec := startSOASecondary(t, 0)
	sec.mute.Store(true)
	a := Access{Zones: map[string]ZoneAccess{zoneName: {Notify: []netip.AddrPort{sec.addr()}}}}
	s, d, _ := xfrServer(t, 2, a)
	d.MarkSerialsVerified()
	runServer(t, s)
	commit := func(ip string) uint32 {
		if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{{UUID: vmB, Records: []db.Record{
			{Zone: zoneName, RR: mustRR(t, "n.dc.example.com. 30 IN A "+ip)}}}}}); err != nil {
			t.Fatal(err)
		}
		cur, _ := s.ZoneSerial(zoneName)
		return cur
	}
	first := commit("10.0.0.1")
	if got := sec.nextNotify(t, 3*time.Second); got != first {
		t.Fatalf("NOTIFY serial %d, want %d", got, first)
	}
	// It answers later, ahead: the serial moves past it.
	ahead := first + 50_000
	sec.serial.Store(ahead)
	sec.mute.Store(false)
	commit("10.0.0.2")
	waitUntil(t, func() bool { cur, _ := s.ZoneSerial(zoneName); return cur == ahead+1 }, "serial moved past the peer's")
	for sec.nextNotify(t, 5*time.Second) != ahead+1 {
	}

	// A peer 2^31 - 1 ahead cannot be passed in one step: propagation
	// shows it as an ERROR saying why.
	third := commit("10.0.0.3")
	sec.serial.Store(third + 1<<31 - 1)
	waitUntil(t, func() bool {
		p, ok := s.Propagation(zoneName, third)
		return ok && len(p.Peers) == 1 && p.Peers[0].State == status.StateError && strings.Contains(p.Peers[0].Error, "ahead of cns")
	}, "propagation ERROR naming the serial ahead")
}

func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
