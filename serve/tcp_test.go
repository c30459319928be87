package serve

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Ensure the global TCP connection limit holds: with every slot taken by
// idle connections from several addresses (each under the per-address
// limit), a new TCP client is turned away, UDP is answered, and TCP
// service comes back when the idle timeout frees the slots, not before.
// The limits are lowered (24 slots, 8 per address, 1 s idle) so that the
// default ones' scenario (1024, 64, 10 s: TestDNSAbuse with CNS_LONG=1)
// runs in a second.
func TestTCPGlobalLimit(t *testing.T) {
	const slots, perIP, idle = 24, 8, time.Second
	s, err := New(Config{Listen: []string{"127.0.0.1:0"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxTCPConns: slots, MaxTCPConnsPerIP: perIP, TCPIdleTimeout: idle}, testStore(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	udp, tcp := s.Addrs()
	dialFrom := func(ip string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: time.Second}
		c, err := d.Dial("tcp", tcp[0])
		if err != nil {
			t.Fatalf("dial from %s: %v", ip, err)
		}
		return c
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	start := time.Now()
	for _, ip := range []string{"127.0.2.1", "127.0.2.2", "127.0.2.3"} {
		for range perIP {
			held = append(held, dialFrom(ip))
		}
	}
	deadline := time.Now().Add(idle / 2)
	for s.tcpActive.Load() < slots {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d connections accepted", s.tcpActive.Load(), slots)
		}
		time.Sleep(time.Millisecond)
	}

	m := new(dns.Msg)
	m.SetQuestion("web1.inst.owner.dc.example.com.", dns.TypeA)
	ask := func() (*dns.Msg, error) {
		c := &dns.Conn{Conn: dialFrom("127.0.2.4")}
		defer c.Close()
		c.SetDeadline(time.Now().Add(idle / 4))
		if err := c.WriteMsg(m); err != nil {
			return nil, err
		}
		return c.ReadMsg()
	}
	if r, err := ask(); err == nil {
		t.Fatalf("a new TCP client was answered while %d idle connections held every slot: %v", slots, r.Answer)
	}
	if r := exchange(t, udp[0], "udp", m); len(r.Answer) != 1 {
		t.Errorf("UDP while the TCP slots are held: %v", r)
	}
	for {
		if _, err := ask(); err == nil {
			break
		}
		if time.Since(start) > 10*idle {
			t.Fatalf("no TCP service %v after the slots were taken (idle timeout %v)", time.Since(start), idle)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if back := time.Since(start); back < idle {
		t.Errorf("TCP service back %v after the slots were taken, before the %v idle timeout freed them", back, idle)
	}
}
