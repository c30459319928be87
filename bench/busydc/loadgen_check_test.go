package busydc

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestHistQuantile(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, 1000 * time.Microsecond}} {
		got := h.quantile(c.q)
		if got < c.want*98/100 || got > c.want*103/100 {
			t.Errorf("quantile(%v) = %v, want %v ± 2 %%", c.q, got, c.want)
		}
	}
	var empty hist
	if empty.quantile(0.99) != 0 {
		t.Error("an empty histogram has a quantile")
	}
}

// TestLoadGen runs the generator against a responder on 127.0.0.1 that
// never answers one id in ten and answers the rest after 2 ms: the
// generator must send at its rate, count exactly the unanswered as lost,
// and time the others as the responder took them: 2 ms on a quiet
// machine, more when the responder waits for a CPU (the whole suite
// under -race on two cores), which the responder times too.
func TestLoadGen(t *testing.T) {
	r := lossyResponder(t, 2*time.Millisecond)
	g, err := newLoadGen(r.addr,
		[]dns.Question{{Name: "a.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	start := time.Now()
	tot := total(g.run(2000, time.Second))
	if took := time.Since(start); took < 2*time.Second || took > 4*time.Second {
		t.Errorf("1 s of sending and 1 s of waiting took %v", took)
	}
	// Ids cycle per socket: query i has id i/4, so ids ≡ 0 mod 10 are
	// every 40th query, 4 sockets × 50 of the 500 ids used per socket:
	// 200 never answered, and on a slow machine (-race) a few more that
	// the responder's socket dropped. Every answer sent must be counted.
	if tot.sent != 2000 || tot.answered+tot.lost != tot.sent || tot.lost < 200 || int64(tot.answered) != r.answered.Load() {
		t.Errorf("sent %d, answered %d (the responder answered %d), lost %d; want 2000 sent, at least 200 lost, every answer counted",
			tot.sent, tot.answered, r.answered.Load(), tot.lost)
	}
	r.timedAs(t, tot.lat.quantile(0.5), 2*time.Millisecond)
}

// TestUDPDrops: datagrams sent to a socket that never reads, with a small
// receive buffer, show in its drop count.
func TestUDPDrops(t *testing.T) {
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	pc.SetReadBuffer(4096)
	port := pc.LocalAddr().(*net.UDPAddr).Port
	before := udpDrops(port)
	c, err := net.DialUDP("udp4", nil, pc.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 1000 {
		c.Write(make([]byte, 200))
	}
	if d := udpDrops(port) - before; d == 0 {
		t.Error("no drop counted for 1000 datagrams into a 4 KiB buffer")
	}
}

// An answer that waited in the generator's socket is timed from when the
// kernel queued it, not from when the receiver read it: queued says how
// long it waited.
func TestQueued(t *testing.T) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	// Linux turns receive stamps on for the whole stack in deferred work
	// (net_enable_timestamp schedules netstamp_work) when the first socket
	// asks for them. A datagram that arrives before that work has run
	// carries no stamp, and recvmsg stamps it as it is read, so it seems not
	// to have waited at all. On a machine where no other socket wants stamps
	// (a fresh CI runner) that is the first datagram here; the next one,
	// sent a whole wait later, is stamped on arrival.
	const wait = 50 * time.Millisecond
	var got time.Duration
	for range 3 {
		if err := syscall.Sendto(fd, []byte("answer"), 0, sa); err != nil {
			t.Fatal(err)
		}
		time.Sleep(wait) // the receiver is late
		buf, oob := make([]byte, 64), make([]byte, syscall.CmsgSpace(16))
		_, oobn, _, _, err := syscall.Recvmsg(fd, buf, oob, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got = time.Duration(queued(oob[:oobn])); got >= wait {
			break
		}
	}
	if got < wait || got > 10*wait {
		t.Errorf("queued %v, want about %v", got, wait)
	}
	if queued(nil) != 0 {
		t.Error("no stamp, yet queued")
	}
}

// TestRTProbe runs the RT probe against a responder on 127.0.0.1 that
// never answers one id in ten and answers the rest after 1 ms: every probe
// due in the run is sent, exactly the unanswered count as lost (each
// after its timeout), and the others are timed near 1 ms.
func TestRTProbe(t *testing.T) {
	r := lossyResponder(t, time.Millisecond)
	server := r.addr
	q, err := (&dns.Msg{Question: []dns.Question{{Name: "a.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET}}}).Pack()
	if err != nil {
		t.Fatal(err)
	}
	const probes = 40
	p, err := runRTProbe(server, q, probes*rtProbeEvery)
	if err != nil {
		t.Fatal(err)
	}
	if p.realtime != nil {
		t.Logf("not real-time here: %v", p.realtime)
	}
	if p.sent != probes || p.lost != probes/10 || p.lat.count() != probes-probes/10 {
		t.Errorf("sent %d, lost %d, timed %d; want %d, %d and %d", p.sent, p.lost, p.lat.count(), probes, probes/10, probes-probes/10)
	}
	r.timedAs(t, p.lat.quantile(0.5), time.Millisecond)
}

// responder is a DNS responder for the generator's and the probe's
// checks: how many answers it sent, and how long it took over each, from
// the kernel's arrival stamp of the query to its write of the answer.
type responder struct {
	addr     netip.AddrPort
	answered atomic.Int64
	mu       sync.Mutex
	took     hist
}

// lossyResponder answers DNS queries on 127.0.0.1, until the test ends,
// after delay, except those whose id is a multiple of ten, which it never
// answers.
func lossyResponder(t *testing.T, delay time.Duration) *responder {
	t.Helper()
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	raw, err := pc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	r := &responder{addr: pc.LocalAddr().(*net.UDPAddr).AddrPort()}
	go func() {
		buf, oob := make([]byte, 512), make([]byte, syscall.CmsgSpace(16))
		for {
			n, oobn, _, addr, err := pc.ReadMsgUDPAddrPort(buf, oob)
			if err != nil {
				return
			}
			arrived := time.Now().Add(-time.Duration(queued(oob[:oobn])))
			if binary.BigEndian.Uint16(buf)%10 == 0 {
				continue
			}
			out := append([]byte(nil), buf[:n]...)
			out[2] |= 0x80 // QR
			time.AfterFunc(delay, func() {
				if _, err := pc.WriteToUDPAddrPort(out, addr); err == nil {
					took := time.Since(arrived)
					r.answered.Add(1)
					r.mu.Lock()
					r.took.add(took)
					r.mu.Unlock()
				}
			})
		}
	}()
	return r
}

// timedAs checks a median latency measured by the client against the
// responder's own: no less than delay, and the responder's median give
// or take 2 ms and an eighth (what the client adds on its side: in
// practice the two fall in one bucket). Both grow when the machine is
// busy; a client that timed from anything but its send would miss.
func (r *responder) timedAs(t *testing.T, med, delay time.Duration) {
	t.Helper()
	r.mu.Lock()
	took := r.took.quantile(0.5)
	r.mu.Unlock()
	slack := 2*time.Millisecond + took/8
	if med < delay || med < took-slack || med > took+slack {
		t.Errorf("median %v for answers sent back after %v; the responder's median %v (± %v)", med, delay, took, slack)
	}
}
