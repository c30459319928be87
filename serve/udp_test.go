package serve

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"
)

// By default a UDP address gets one socket per CPU cns may run on, not
// one per P: more Ps than CPUs (GOMAXPROCS=2 on one CPU) add no socket.
func TestListenUDPOneSocketPerCPU(t *testing.T) {
	if !reusePortSupported {
		t.Skip("no SO_REUSEPORT: one socket whatever the CPUs")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	cpus := runtime.NumCPU()
	for _, procs := range []int{1, cpus, cpus + 1} {
		runtime.GOMAXPROCS(procs)
		conns, err := listenUDP(netip.MustParseAddrPort("127.0.0.1:0"), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range conns {
			c.Close()
		}
		if want := min(procs, cpus); len(conns) != want {
			t.Errorf("%d Ps on %d CPUs: %d sockets, want %d", procs, cpus, len(conns), want)
		}
	}
}

// openBatch binds one UDP socket to addr (port 0) and returns it with its
// batch, and a client socket connected to it. Both close at the end.
func openBatch(t *testing.T, addr string) (udpConn, packetBatch, *net.UDPConn) {
	t.Helper()
	conns, err := listenUDP(netip.MustParseAddrPort(addr), 1)
	if err != nil {
		t.Fatal(err)
	}
	c := conns[0]
	t.Cleanup(func() { c.Close() })
	pb, err := newPacketBatch(c)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := net.DialUDP("udp", nil, c.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	cl.SetDeadline(time.Now().Add(10 * time.Second))
	return c, pb, cl
}

// echo answers every datagram of one read with "re:" and the datagram,
// checking that each came from want, and returns what it read.
func echo(t *testing.T, pb packetBatch, want netip.AddrPort) []string {
	t.Helper()
	n, err := pb.read()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range n {
		msg, src := pb.packet(i)
		if src != want {
			t.Errorf("datagram %q from %v, want %v", msg, src, want)
		}
		got = append(got, string(msg))
		pb.queue(i, append([]byte("re:"), msg...))
	}
	if err := pb.flush(); err != nil {
		t.Fatal(err)
	}
	return got
}

// A batch reads the datagrams queued on its socket with their senders,
// at most udpBatch at a time, and sends each answer to the sender of its
// question, in both families.
func TestPacketBatchAnswersEachSender(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			c, pb, cl := openBatch(t, addr)
			other, err := net.DialUDP("udp", nil, c.LocalAddr().(*net.UDPAddr))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			other.SetDeadline(time.Now().Add(10 * time.Second))
			clients := []*net.UDPConn{cl, other}
			const total = udpBatch + 7
			var want []string
			for i := range total {
				k := clients[i%2]
				q := fmt.Sprintf("q%d", i)
				k.Write([]byte(q))
				want = append(want, fmt.Sprintf("%s from %v", q, k.LocalAddr()))
			}
			var got []string
			for len(got) < total {
				n, err := pb.read()
				if err != nil {
					t.Fatal(err)
				}
				if n > udpBatch {
					t.Fatalf("one read returned %d datagrams, more than a batch (%d)", n, udpBatch)
				}
				for i := range n {
					msg, src := pb.packet(i)
					got = append(got, fmt.Sprintf("%s from %v", msg, src))
					pb.queue(i, append([]byte("re:"), msg...))
				}
				if err := pb.flush(); err != nil {
					t.Fatal(err)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("read %q, want %q", got, want)
			}
			buf := make([]byte, 64)
			for i := range total {
				n, err := clients[i%2].Read(buf)
				if err != nil {
					t.Fatalf("answer %d: %v", i, err)
				}
				if want := fmt.Sprintf("re:q%d", i); string(buf[:n]) != want {
					t.Fatalf("answer %d is %q, want %q", i, buf[:n], want)
				}
			}
		})
	}
}

// A reader that waits for its socket is woken by every datagram, one
// question after the other (each wait arms the socket again).
func TestPacketBatchWakesForEachDatagram(t *testing.T) {
	_, pb, cl := openBatch(t, "127.0.0.1:0")
	from := cl.LocalAddr().(*net.UDPAddr).AddrPort()
	const rounds = 5
	read := make(chan []string, rounds)
	go func() {
		for range rounds {
			n, err := pb.read()
			if err != nil {
				read <- []string{err.Error()}
				return
			}
			var got []string
			for i := range n {
				msg, src := pb.packet(i)
				got = append(got, fmt.Sprintf("%s from %v", msg, src))
				pb.queue(i, msg)
			}
			pb.flush()
			read <- got
		}
	}()
	buf := make([]byte, 64)
	for i := range rounds {
		q := fmt.Sprintf("q%d", i)
		cl.Write([]byte(q))
		if _, err := cl.Read(buf); err != nil {
			t.Fatalf("question %d not answered: %v", i, err)
		}
		if got, want := <-read, []string{fmt.Sprintf("%s from %v", q, from)}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("read %d: %q, want %q", i, got, want)
		}
	}
}

// waitParked returns once a goroutine whose stack holds fn is parked in
// the network poller (a reader waiting for its socket).
func waitParked(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	waitUntil(t, func() bool {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "[IO wait") && strings.Contains(g, fn) {
				return true
			}
		}
		return false
	}, "a reader parked in "+fn)
}

// Closing a socket wakes its reader parked waiting for a datagram, which
// returns net.ErrClosed (Server.Close waits for it); a second Close says
// it was closed.
func TestUDPCloseWakesParkedReader(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			c, pb, _ := openBatch(t, addr)
			done := make(chan error, 1)
			go func() { done <- readUntilClosed(pb) }()
			waitParked(t, "readUntilClosed")
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if !isClosed(err) {
					t.Errorf("the parked read returned %v, want net.ErrClosed", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the reader is still parked 10 s after Close")
			}
			if err := c.Close(); !isClosed(err) {
				t.Errorf("second Close: %v, want net.ErrClosed", err)
			}
			if _, err := pb.read(); !isClosed(err) {
				t.Errorf("read after Close: %v, want net.ErrClosed", err)
			}
		})
	}
}

// readUntilClosed reads until the batch's socket fails; its name is what
// waitParked looks for.
func readUntilClosed(pb packetBatch) error {
	for {
		if _, err := pb.read(); err != nil {
			return err
		}
	}
}

// The forwarder's WriteTo sends one datagram to the address given, in
// both families, and refuses an address that is not UDP's.
func TestUDPWriteTo(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			c, _, cl := openBatch(t, addr)
			if n, err := c.WriteTo([]byte("forwarded"), cl.LocalAddr()); err != nil || n != len("forwarded") {
				t.Fatalf("WriteTo: %d, %v", n, err)
			}
			buf := make([]byte, 64)
			n, from, err := cl.ReadFromUDP(buf)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf[:n], []byte("forwarded")) || from.AddrPort() != c.LocalAddr().(*net.UDPAddr).AddrPort() {
				t.Errorf("got %q from %v, want %q from %v", buf[:n], from, "forwarded", c.LocalAddr())
			}
			if _, err := c.WriteTo([]byte("x"), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}); err == nil {
				t.Error("WriteTo a TCP address: no error")
			}
		})
	}
}
