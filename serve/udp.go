package serve

import (
	"net"
	"net/netip"
	"runtime"
)

// udpBatch is how many datagrams one read or write system call moves
// (recvmmsg/sendmmsg where the platform has them).
const udpBatch = 32

// udpReceiveBuffer is the kernel receive buffer asked for each UDP socket.
const udpReceiveBuffer = 8 << 20

// udpReadSize bounds a request; larger datagrams are cut and answered
// FORMERR, which is what they deserve.
const udpReadSize = 4096

// packetBatch moves datagrams through one socket, many per system call
// where the platform can (recvmmsg/sendmmsg), without allocating per
// datagram: a server that allocates nothing while it answers keeps its
// heap, and so its memory, the size of its zones.
type packetBatch interface {
	// read waits for datagrams and returns how many arrived (at most
	// udpBatch). It drops what was queued and not flushed.
	read() (int, error)
	// packet returns the i-th datagram of the last read and its sender.
	packet(i int) ([]byte, netip.AddrPort)
	// queue makes b the answer to the i-th datagram; b must stay intact
	// until flush.
	queue(i int, b []byte)
	// flush sends what was queued. A destination the kernel refuses loses
	// its answer, not the rest of the batch.
	flush() error
}

// udpConn is what the server keeps of a UDP socket: its address, a way
// to send an answer outside the batches (the forwarder's), and Close.
type udpConn interface {
	LocalAddr() net.Addr
	WriteTo(b []byte, to net.Addr) (int, error)
	Close() error
}

// ipVersion is "4" or "6", the family a listener on ap takes. Sockets are
// opened for one family explicitly: Go makes "udp" and "tcp" on 0.0.0.0 a
// dual-stack [::] socket, and the default dns_listen (0.0.0.0:53 and
// [::]:53) would then fail on its second entry.
func ipVersion(ap netip.AddrPort) string {
	if ap.Addr().Is6() && !ap.Addr().Is4In6() {
		return "6"
	}
	return "4"
}

// listenUDP binds n sockets to ap. With SO_REUSEPORT the kernel spreads
// datagrams over them, so each core reads its own socket; elsewhere one
// socket is shared. By default there is one socket per CPU cns may run
// on, not per P: with more Ps than CPUs (GOMAXPROCS=2 on one CPU, so that
// a commit does not hold the answers back) a second socket would only
// halve the datagrams each wake-up reads.
func listenUDP(ap netip.AddrPort, n int) ([]udpConn, error) {
	if n <= 0 {
		n = min(runtime.GOMAXPROCS(0), runtime.NumCPU())
	}
	if !reusePortSupported {
		n = 1
	}
	return openUDP(ap, n)
}

// prefetchLookups starts the memory loads of the first table lookup of
// each parsed query of a batch (batchPrefetch), before any is answered.
func (s *Server) prefetchLookups(qs []query, res []parseResult) {
	sn := s.snap.Load()
	var pf batchPrefetch
	for i := range qs {
		if res[i] != parseOK {
			continue
		}
		name := qs[i].lower()
		if z, _ := sn.findZone(name); z != nil && z.names != nil && len(name) > len(z.wire) {
			pf.add(z.names, name)
		}
	}
	pf.run()
}

// serveUDP reads requests from c in batches and writes the answers back in
// batches: every datagram of a batch is parsed and its lookup prefetched
// before the first is answered. Buffers are allocated once per socket.
func (s *Server) serveUDP(c udpConn, cnt *counters, ep endpoint) {
	pb, err := newPacketBatch(c)
	if err != nil {
		s.log.Error("udp socket", "addr", c.LocalAddr().String(), "err", err)
		return
	}
	outBufs := make([][]byte, udpBatch)
	for i := range outBufs {
		outBufs[i] = make([]byte, 0, int(s.udpSize)+optLen+64)
	}
	qc := &queryConn{endpoint: ep}
	qs := make([]query, udpBatch)
	var res [udpBatch]parseResult
	for {
		n, err := pb.read()
		if err != nil {
			if isClosed(err) || s.closed.Load() {
				return
			}
			s.log.Warn("udp read", "err", err)
			continue
		}
		for i := 0; i < n; i++ {
			msg, src := pb.packet(i)
			q := &qs[i]
			q.tcp, q.src, q.conn = false, src, qc
			res[i] = q.parse(msg)
		}
		s.prefetchLookups(qs[:n], res[:n])
		k := 0
		for i := 0; i < n; i++ {
			q := &qs[i]
			var resp []byte
			verdict := rrlAnswer
			if rl := s.rrl.Load(); rl != nil && res[i] == parseOK {
				verdict = rl.check(q.src.Addr())
			}
			switch verdict {
			case rrlAnswer:
				resp = s.respond(q, res[i], outBufs[k][:0], minUDPSize)
			case rrlSlip:
				resp = s.slipReply(q, outBufs[k][:0])
			}
			if resp == nil && q.forward {
				resp = s.forwardUDP(q, c, net.UDPAddrFromAddrPort(q.src), outBufs[k][:0])
			}
			cnt.count(q, resp)
			if resp == nil {
				continue
			}
			pb.queue(i, resp)
			k++
		}
		if err := pb.flush(); err != nil {
			if isClosed(err) || s.closed.Load() {
				return
			}
			s.log.Warn("udp write", "err", err)
		}
	}
}
