package serve

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/serve/policy"
)

// Ensure the limiter answers up to the rate per client network and
// second, slips every Slip-th limited answer, and counts networks apart.
func TestRRLCheck(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	rl := newRRL(policy.RRL{ResponsesPerSecond: 5, Slip: 2, Exempt: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}})
	rl.now = func() time.Time { return now }
	count := func(src string, n int) (answer, slip, drop int) {
		for range n {
			switch rl.check(netip.MustParseAddr(src)) {
			case rrlAnswer:
				answer++
			case rrlSlip:
				slip++
			default:
				drop++
			}
		}
		return
	}
	if a, s, d := count("192.0.2.1", 15); a != 5 || s != 5 || d != 5 {
		t.Errorf("one source: %d answered %d slipped %d dropped, want 5/5/5", a, s, d)
	}
	if a, _, _ := count("192.0.2.77", 3); a != 0 {
		t.Errorf("same /24: %d answered, want 0 (shares the budget)", a)
	}
	if a, _, _ := count("198.51.100.1", 5); a != 5 {
		t.Errorf("another /24: %d answered, want 5", a)
	}
	if a, _, _ := count("10.9.1.1", 100); a != 100 {
		t.Errorf("exempt network: %d answered, want 100", a)
	}
	if a, _, _ := count("2001:db8:0:ff::1", 5); a != 5 {
		t.Errorf("v6: %d answered", a)
	}
	if a, _, _ := count("2001:db8:0:ee::1", 1); a != 0 {
		t.Errorf("same /56 in v6: %d answered, want 0", a)
	}
	now = now.Add(time.Second)
	if a, _, _ := count("192.0.2.1", 5); a != 5 {
		t.Errorf("next second: %d answered, want 5", a)
	}
	if newRRL(policy.RRL{}) != nil {
		t.Error("RRL on with a zero rate")
	}
}

// Ensure a flood from one network is cut while another network keeps full
// service, over real sockets.
func TestRRLFlood(t *testing.T) {
	s, _ := startServer(t, testStore(t), true)
	s.SetRRL(policy.RRL{ResponsesPerSecond: 50, Slip: 2})
	udp, _ := s.Addrs()
	dst, _ := net.ResolveUDPAddr("udp", udp[0])
	m := new(dns.Msg)
	m.SetQuestion("web1.inst.owner.dc.example.com.", dns.TypeA)
	pkt, _ := m.Pack()

	flood, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP("127.1.0.1")})
	if err != nil {
		t.Skip("cannot bind 127.1.0.1:", err)
	}
	defer flood.Close()
	for range 1000 {
		flood.WriteToUDP(pkt, dst)
	}
	full, trunc := 0, 0
	buf := make([]byte, 4096)
	for {
		flood.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, _, err := flood.ReadFromUDP(buf)
		if err != nil {
			break
		}
		var r dns.Msg
		if r.Unpack(buf[:n]) != nil {
			continue
		}
		if r.Truncated {
			trunc++
		} else {
			full++
		}
	}
	// The flood may straddle a second boundary: at most two seconds' worth.
	if full == 0 || full > 100 || trunc == 0 {
		t.Errorf("flood: %d full answers and %d truncated, want 1..100 and some", full, trunc)
	}

	// Another network is answered in full while the flood's network is
	// limited.
	other, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP("127.2.0.1")})
	if err != nil {
		t.Skip("cannot bind 127.2.0.1:", err)
	}
	defer other.Close()
	answered := 0
	for range 20 {
		flood.WriteToUDP(pkt, dst)
		other.WriteToUDP(pkt, dst)
		other.SetReadDeadline(time.Now().Add(time.Second))
		n, _, err := other.ReadFromUDP(buf)
		var r dns.Msg
		if err == nil && r.Unpack(buf[:n]) == nil && !r.Truncated && len(r.Answer) == 1 {
			answered++
		}
	}
	if answered != 20 {
		t.Errorf("other network: %d of 20 answered", answered)
	}
	if s.RRLLimited() == 0 {
		t.Error("nothing counted as limited")
	}
}
