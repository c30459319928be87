package busydc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// hist is a latency histogram with buckets 2 % wide (bucket i holds
// latencies up to 1.02^i - 1 µs), from 1 µs to ~30 s.
type hist struct{ n [histBuckets]uint64 }

const histBuckets = 900

func bucketOf(d time.Duration) int {
	us := float64(d) / 1e3
	i := int(math.Ceil(math.Log1p(us) / math.Log(1.02)))
	return min(max(i, 0), histBuckets-1)
}

func (h *hist) add(d time.Duration) { h.n[bucketOf(d)]++ }

func (h *hist) merge(o *hist) {
	for i, c := range o.n {
		h.n[i] += c
	}
}

func (h *hist) count() uint64 {
	var n uint64
	for _, c := range h.n {
		n += c
	}
	return n
}

// quantile returns the latency below which a fraction q of the samples
// fall (the upper edge of that bucket), 0 when empty.
func (h *hist) quantile(q float64) time.Duration {
	total := h.count()
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range h.n {
		seen += c
		if seen >= rank {
			return time.Duration((math.Pow(1.02, float64(i)) - 1) * 1e3)
		}
	}
	return time.Duration((math.Pow(1.02, histBuckets-1) - 1) * 1e3)
}

// second is what the load generator saw of the queries sent in one
// second of the run.
type second struct {
	sent, answered, lost, errors uint64
	late                         uint64 // sent over 100 µs behind the schedule: the generator's own lag
	lat                          hist
}

// loadGen sends DNS queries over UDP at a fixed rate, open loop (the
// schedule never waits for answers, so a stalled server cannot slow the
// sender and hide its stall), and times every answer against the moment
// its query was sent. Sender and receivers are OS threads of their own
// that block in plain syscalls: Go's netpoller rounds sleeps to a
// millisecond, which would turn a fixed rate into 1 ms bursts.
//
// A query is matched to its answer by socket and DNS id; each socket
// cycles through its 65,536 ids, so with S sockets a query has S×65,536 /
// rate seconds to be answered before its slot is reused and it counts as
// lost (8 s at 32k qps with 4 sockets); at the end, queries unanswered
// 1 s after the last send count as lost.
type loadGen struct {
	fds   []int
	pkts  [][]byte // queries with their id to patch in
	t0    time.Time
	slots []atomic.Int64 // send time (ns since t0) + 1; 0 = answered or free

	mu   sync.Mutex
	secs []second
}

const loadSockets = 4

const prSetTimerslack = 29 // prctl(2) PR_SET_TIMERSLACK

func newLoadGen(server netip.AddrPort, queries []dns.Question) (*loadGen, error) {
	g := &loadGen{slots: make([]atomic.Int64, loadSockets<<16)}
	for _, q := range queries {
		m := new(dns.Msg)
		m.SetQuestion(q.Name, q.Qtype)
		b, err := m.Pack()
		if err != nil {
			return nil, err
		}
		g.pkts = append(g.pkts, b)
	}
	for range loadSockets {
		fd, err := dialUDP(server, 100*time.Millisecond)
		if err != nil {
			g.close()
			return nil, err
		}
		g.fds = append(g.fds, fd)
		// A deep receive buffer: a query lost must be the server's loss,
		// never the generator's own socket overflowing.
		if syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 8<<20) != nil {
			syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8<<20) // up to rmem_max
		}
		// The kernel stamps each answer as it reaches the socket, so
		// a receiver thread that waits for the CPU (the driver's CPU
		// also runs the simulator and the probes) does not add its
		// wait to cns's latency.
		syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}
	return g, nil
}

// dialUDP returns a UDP socket connected to server whose reads give up
// after timeout (EAGAIN): a plain file descriptor, read and written with
// blocking system calls from a thread of its own, outside Go's poller.
func dialUDP(server netip.AddrPort, timeout time.Duration) (int, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return -1, err
	}
	tv := syscall.NsecToTimeval(int64(timeout))
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	if err := syscall.Connect(fd, &syscall.SockaddrInet4{Port: int(server.Port()), Addr: server.Addr().As4()}); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// ports are the generator's local UDP ports.
func (g *loadGen) ports() []int {
	var out []int
	for _, fd := range g.fds {
		if sa, err := syscall.Getsockname(fd); err == nil {
			out = append(out, sa.(*syscall.SockaddrInet4).Port)
		}
	}
	return out
}

func (g *loadGen) close() {
	for _, fd := range g.fds {
		syscall.Close(fd)
	}
}

func (g *loadGen) sec(ns int64) *second {
	i := int(ns / 1e9)
	for len(g.secs) <= i {
		g.secs = append(g.secs, second{})
	}
	return &g.secs[i]
}

// run sends rate queries a second for d, then waits a second for the last
// answers, and returns the per-second record (index: second of sending,
// from the moment run was called).
func (g *loadGen) run(rate float64, d time.Duration) []second {
	g.t0 = time.Now()
	g.secs = nil
	for i := range g.slots {
		g.slots[i].Store(0)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for k, fd := range g.fds {
		wg.Go(func() { g.receive(k, fd, &stop) })
	}
	g.send(rate, d)
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.slots {
		if v := g.slots[i].Swap(0); v != 0 {
			g.sec(v-1).lost++
		}
	}
	return g.secs
}

func (g *loadGen) send(rate float64, d time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The default 50 µs timer slack would make every nanosleep overshoot
	// by that much (this thread only: it stays locked to it).
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1, 0)
	period := float64(time.Second) / rate
	total := int(rate * d.Seconds())
	buf := make([]byte, 512)
	for i := range total {
		due := int64(float64(i) * period)
		now := int64(time.Since(g.t0))
		if wait := due - now; wait > 20_000 {
			ts := syscall.NsecToTimespec(wait)
			syscall.Nanosleep(&ts, nil)
			now = int64(time.Since(g.t0))
		}
		k := i % loadSockets
		id := uint16(i / loadSockets)
		slot := k<<16 | int(id)
		pkt := g.pkts[i%len(g.pkts)]
		n := copy(buf, pkt)
		binary.BigEndian.PutUint16(buf, id)
		prev := g.slots[slot].Swap(now + 1)
		g.mu.Lock()
		if prev != 0 {
			g.sec(prev-1).lost++
		}
		s := g.sec(now)
		s.sent++
		if now-due > 100_000 {
			s.late++
		}
		g.mu.Unlock()
		syscall.Write(g.fds[k], buf[:n])
	}
}

func (g *loadGen) receive(k, fd int, stop *atomic.Bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, 4096)
	oob := make([]byte, syscall.CmsgSpace(16))
	for !stop.Load() {
		n, oobn, _, _, err := syscall.Recvmsg(fd, buf, oob, 0)
		now := int64(time.Since(g.t0)) - queued(oob[:oobn])
		if err != nil {
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.ECONNREFUSED) {
				continue
			}
			return
		}
		if n < 12 {
			continue
		}
		id := binary.BigEndian.Uint16(buf)
		slot := &g.slots[k<<16|int(id)]
		sent := slot.Load()
		if sent == 0 || !slot.CompareAndSwap(sent, 0) {
			continue // late: already counted lost
		}
		rcode := buf[3] & 0xf
		g.mu.Lock()
		s := g.sec(sent - 1)
		s.answered++
		s.lat.add(time.Duration(now - (sent - 1)))
		if rcode != dns.RcodeSuccess && rcode != dns.RcodeNameError {
			s.errors++
		}
		g.mu.Unlock()
	}
}

// queued is how long ago, in ns, the kernel put the datagram whose
// control messages are oob on the socket (SCM_TIMESTAMPNS, wall clock:
// over so short a time it agrees with the monotonic one), 0 without a
// stamp.
func queued(oob []byte) int64 {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec := int64(binary.NativeEndian.Uint64(m.Data))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:]))
			return max(time.Now().UnixNano()-(sec*1e9+nsec), 0)
		}
	}
	return 0
}

// total sums a range of seconds.
func total(secs []second) second {
	var t second
	for i := range secs {
		s := &secs[i]
		t.sent += s.sent
		t.answered += s.answered
		t.lost += s.lost
		t.errors += s.errors
		t.late += s.late
		t.lat.merge(&s.lat)
	}
	return t
}

// udpDrops sums the kernel's drop counters (/proc/net/udp: datagrams a
// full receive buffer refused) of the IPv4 UDP sockets bound to ports.
func udpDrops(ports ...int) uint64 {
	raw, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return 0
	}
	want := map[string]bool{}
	for _, p := range ports {
		want[fmt.Sprintf("%04X", p)] = true
	}
	var n uint64
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 13 {
			continue
		}
		_, port, _ := strings.Cut(f[1], ":")
		if want[port] {
			d, _ := strconv.ParseUint(f[len(f)-1], 10, 64)
			n += d
		}
	}
	return n
}
