package serve

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
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

// Ensure a db created empty stays unverified until it holds zones and
// they were checked: verified with nothing in it, a first load's zones
// below the secondaries would be trusted after a crash or a power cut
// that came before their check (TestPowerCutServe found it).
func TestSerialCheckEmptyDBStaysUnverified(t *testing.T) {
	sec := startSOASecondary(t, 0)
	a := Access{Zones: map[string]ZoneAccess{zoneName: {Notify: []netip.AddrPort{sec.addr()}}}}
	d, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s, err := New(Config{Listen: []string{"127.0.0.1:0"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Access: a}, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	runServer(t, s)
	// The round at start has nothing to ask; it must not vouch for
	// zones to come. (A round is quick: give it ten times its time.)
	time.Sleep(200 * time.Millisecond)
	if why, _ := d.SerialsUnverified(); why != "created empty" {
		t.Fatalf("an empty db was verified before it held a zone: %q", why)
	}
	// The first zone is checked, and then the db is.
	if _, err := d.Commit(&db.ChangeSet{Zones: &db.ZoneConfig{Forward: map[string]db.Apex{zoneName: testApex()}, Reverse: testApex()},
		VMs: []db.VMChange{{UUID: vmA, Records: []db.Record{{Zone: zoneName, RR: mustRR(t, "n.dc.example.com. 30 IN A 10.0.0.1")}}}}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { why, _ := d.SerialsUnverified(); return why == "" }, "serials verified once the zone was checked")
}

// Ensure a secondary whose serial the unverified db's journal starts from
// (the db reused it: another version of the zone at that serial) gets
// the whole zone, never a difference from cns's version of it.
func TestSerialCheckReusedSerial(t *testing.T) {
	sec := startSOASecondary(t, 0)
	sec.mute.Store(true) // silent while the db makes its journal
	a := Access{AllowTransfer: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Zones: map[string]ZoneAccess{zoneName: {Notify: []netip.AddrPort{sec.addr()}}}}
	s, d, addr := xfrServer(t, 2, a)
	// Three changes: the journal starts from the serials of the first
	// three versions.
	var serials []uint32
	for i := range 3 {
		cur, _ := s.ZoneSerial(zoneName)
		serials = append(serials, cur)
		if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{{UUID: vmB, Records: []db.Record{
			{Zone: zoneName, RR: mustRR(t, fmt.Sprintf("n.dc.example.com. 30 IN A 10.0.0.%d", i+1))}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := d.Journal(zoneName, serials[1]); !ok {
		t.Fatalf("setup: the journal does not start from %d", serials[1])
	}
	// whole reports whether an IXFR from serial, asked from local, gets
	// the whole zone.
	whole := func(serial uint32, local string) bool {
		m := new(dns.Msg)
		m.SetIxfr(zoneName+".", serial, "ns.", "h.")
		rrs, err := transfer(t, addr, local, m, nil)
		if err != nil || len(rrs) < 3 {
			t.Fatalf("IXFR from %d: %d records, %v", serial, len(rrs), err)
		}
		return rrs[1].Header().Rrtype != dns.TypeSOA
	}
	// Before a peer has answered, no serial of its is taken on trust
	// (asked from 127.0.0.2: a transfer from the secondary's address
	// would make what it holds this run's).
	runServer(t, s)
	if !whole(serials[2], "127.0.0.2") {
		t.Fatalf("IXFR from %d before the peer answered: a difference, want the whole zone", serials[2])
	}
	// The secondary holds the second serial, from the lost db.
	sec.serial.Store(serials[1])
	sec.mute.Store(false)
	waitUntil(t, func() bool { _, ok, _ := d.Journal(zoneName, serials[1]); return !ok },
		"the journal to forget the serial the secondary holds")
	if !whole(serials[1], "") {
		t.Fatalf("IXFR from the reused serial %d: a difference, want the whole zone", serials[1])
	}
	if whole(serials[2], "") {
		t.Errorf("IXFR from %d, newer than the secondary's serial, once it answered: the whole zone, want a difference", serials[2])
	}
	if probs, err := d.Check(); err != nil || len(probs) > 0 {
		t.Fatalf("check: %v %v", probs, err)
	}
}

// Ensure a secondary at the very serial an unverified db holds, which
// the check moves past, gets the whole zone: the raise's journal entry
// starts from that serial, in cns's version of it, which the secondary's
// need not be.
func TestSerialCheckSameSerialGetsWholeZone(t *testing.T) {
	sec := startSOASecondary(t, 0)
	sec.mute.Store(true)
	a := Access{AllowTransfer: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Zones: map[string]ZoneAccess{zoneName: {Notify: []netip.AddrPort{sec.addr()}}}}
	s, d, addr := xfrServer(t, 2, a)
	cur, _ := s.ZoneSerial(zoneName)
	sec.serial.Store(cur)
	sec.mute.Store(false)
	runServer(t, s)
	waitUntil(t, func() bool { why, _ := d.SerialsUnverified(); return why == "" }, "serials verified")
	if now, _ := s.ZoneSerial(zoneName); now == cur {
		t.Fatalf("the zone was not moved past the secondary's serial %d", cur)
	}
	m := new(dns.Msg)
	m.SetIxfr(zoneName+".", cur, "ns.", "h.")
	rrs, err := transfer(t, addr, "", m, nil)
	if err != nil || len(rrs) < 3 {
		t.Fatalf("IXFR from %d: %d records, %v", cur, len(rrs), err)
	}
	if rrs[1].Header().Rrtype == dns.TypeSOA {
		t.Fatalf("IXFR from %d, the serial the secondary held in a version cns cannot vouch for: a difference, want the whole zone", cur)
	}
}
