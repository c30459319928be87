package serve

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/serve/policy"
)

// fakeSecondary answers SOA queries with the serial it is told it has,
// and NOTIFYs with NOERROR.
type fakeSecondary struct {
	conn   *net.UDPConn
	serial atomic.Uint32
}

func startFakeSecondary(t *testing.T) *fakeSecondary {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSecondary{conn: c}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			var m dns.Msg
			if m.Unpack(buf[:n]) != nil {
				continue
			}
			r := new(dns.Msg)
			r.SetReply(&m)
			if m.Opcode == dns.OpcodeQuery && m.Question[0].Qtype == dns.TypeSOA {
				if s := f.serial.Load(); s != 0 {
					apex := testApex()
					r.Answer = []dns.RR{apex.SOA(zoneName, s)}
				} else {
					r.Rcode = dns.RcodeServerFailure
				}
			}
			b, _ := r.Pack()
			c.WriteToUDP(b, from)
		}
	}()
	t.Cleanup(func() { c.Close() })
	return f
}

func (f *fakeSecondary) addr() netip.AddrPort { return f.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Ensure a serial is PENDING until every peer serves it, ACTIVE then with
// each peer's time, and ERROR for a peer that never catches up.
func TestPropagation(t *testing.T) {
	fast, slow := startFakeSecondary(t), startFakeSecondary(t)
	a := Access{Zones: map[string]ZoneAccess{zoneName: {Notify: []netip.AddrPort{fast.addr(), slow.addr()}}}, MinNotifyInterval: 10 * time.Millisecond}
	s, d, _ := xfrServer(t, 5, a)
	s.prop.policy = normalPropagation(policy.Propagation{PollDelay: 10 * time.Millisecond, PollInterval: 20 * time.Millisecond, PollMaxRetries: 15})
	runServer(t, s)

	if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{{UUID: vmB, Records: []db.Record{
		{Zone: zoneName, RR: mustRR(t, "p.dc.example.com. 30 IN A 10.0.0.7")},
	}}}}); err != nil {
		t.Fatal(err)
	}
	serial, _ := s.ZoneSerial(zoneName)
	p, ok := s.Propagation(zoneName, serial)
	if !ok || p.State != status.StatePending || len(p.Peers) != 2 {
		t.Fatalf("after commit: %+v", p)
	}
	fast.serial.Store(serial)
	waitFor(t, s, func(p status.Propagation) bool { return peerState(p, fast.addr()) == status.StateActive }, serial)
	p, _ = s.Propagation(zoneName, serial)
	if p.State != status.StatePending || peerSeconds(p, fast.addr()) < 0 {
		t.Errorf("one peer of two: %+v", p)
	}
	// The slow one never gets there: ERROR for it and the serial.
	waitFor(t, s, func(p status.Propagation) bool { return p.State == status.StateError }, serial)
	p, _ = s.Propagation(zoneName, serial)
	if peerState(p, slow.addr()) != status.StateError || peerState(p, fast.addr()) != status.StateActive {
		t.Errorf("slow peer not in ERROR, or the fast one not ACTIVE: %+v", p)
	}
	// It catches up; the periodic sync heals the serial.
	slow.serial.Store(serial)
	s.prop.resync()
	waitFor(t, s, func(p status.Propagation) bool { return p.State == status.StateActive }, serial)
	if h := s.PropagationHistograms(); h[fast.addr().String()].Count != 1 {
		t.Errorf("histograms %+v", h)
	}

	// With a 50% threshold one peer suffices.
	s.prop.mu.Lock() // settle reads it under mu, from the polling goroutines
	s.prop.policy.ThresholdPercent = 50
	s.prop.mu.Unlock()
	if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{{UUID: vmB, Records: []db.Record{{Zone: zoneName, RR: mustRR(t, "p.dc.example.com. 30 IN A 10.0.0.8")}}}}}); err != nil {
		t.Fatal(err)
	}
	serial2, _ := s.ZoneSerial(zoneName)
	slow.serial.Store(serial2)
	waitFor(t, s, func(p status.Propagation) bool { return p.State == status.StateActive }, serial2)
}

func peerState(p status.Propagation, a netip.AddrPort) string {
	for _, pp := range p.Peers {
		if pp.Target == a {
			return pp.State
		}
	}
	return ""
}

func peerSeconds(p status.Propagation, a netip.AddrPort) float64 {
	for _, pp := range p.Peers {
		if pp.Target == a {
			return pp.Seconds
		}
	}
	return -2
}

// waitFor waits on the server's change signal until ok holds for serial.
func waitFor(t *testing.T, s *Server, ok func(status.Propagation) bool, serial uint32) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		ch := s.PropagationChanged()
		if p, found := s.Propagation(zoneName, serial); found && ok(p) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			p, _ := s.Propagation(zoneName, serial)
			t.Fatalf("propagation of %d never got there: %+v", serial, p)
		}
	}
}
