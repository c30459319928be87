package serve

import (
	"context"
	"net"
	"net/netip"
	"runtime"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// udpBatch is how many datagrams one read or write system call moves
// (recvmmsg/sendmmsg where the platform has them).
const udpBatch = 32

// udpReceiveBuffer is the kernel receive buffer asked for each UDP socket.
const udpReceiveBuffer = 8 << 20

// udpReadSize bounds a request; larger datagrams are cut and answered
// FORMERR, which is what they deserve.
const udpReadSize = 4096

// batchConn is the part of ipv4.PacketConn and ipv6.PacketConn used here;
// both take the same Message type.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// listenUDP binds n sockets to ap. With SO_REUSEPORT the kernel spreads
// datagrams over them, so each core reads its own socket; elsewhere one
// socket is shared.
func listenUDP(ap netip.AddrPort, n int) ([]net.PacketConn, error) {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	if !reusePortSupported {
		n = 1
	}
	lc := net.ListenConfig{Control: reusePortControl}
	network := "udp4"
	if ap.Addr().Is6() && !ap.Addr().Is4In6() {
		network = "udp6"
	}
	first, err := lc.ListenPacket(context.Background(), network, ap.String())
	if err != nil {
		return nil, err
	}
	conns := []net.PacketConn{first}
	for len(conns) < n {
		c, err := lc.ListenPacket(context.Background(), network, first.LocalAddr().String())
		if err != nil {
			break // serve with what we have
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// serveUDP reads requests from c in batches and writes the answers back in
// batches. Buffers are allocated once per socket.
func (s *Server) serveUDP(c net.PacketConn, cnt *counters) {
	var bc batchConn
	if ua, ok := c.LocalAddr().(*net.UDPAddr); ok && ua.IP.To4() == nil {
		bc = ipv6.NewPacketConn(c)
	} else {
		bc = ipv4.NewPacketConn(c)
	}
	in := make([]ipv4.Message, udpBatch)
	out := make([]ipv4.Message, udpBatch)
	outBufs := make([][]byte, udpBatch)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, udpReadSize)}
		out[i].Buffers = [][]byte{nil}
		outBufs[i] = make([]byte, 0, int(s.udpSize)+optLen+64)
	}
	var q query
	for {
		n, err := bc.ReadBatch(in, 0)
		if err != nil {
			if isClosed(err) || s.closed.Load() {
				return
			}
			s.log.Warn("udp read", "err", err)
			continue
		}
		k := 0
		for i := 0; i < n; i++ {
			m := &in[i]
			q.tcp = false
			if ua, ok := m.Addr.(*net.UDPAddr); ok {
				q.src = ua.AddrPort()
			}
			res := q.parse(m.Buffers[0][:m.N])
			var resp []byte
			verdict := rrlAnswer
			if rl := s.rrl.Load(); rl != nil && res == parseOK {
				verdict = rl.check(q.src.Addr())
			}
			switch verdict {
			case rrlAnswer:
				resp = s.respond(&q, res, outBufs[k][:0], minUDPSize)
			case rrlSlip:
				resp = s.slipReply(&q, outBufs[k][:0])
			}
			if resp == nil && q.forward {
				resp = s.forwardUDP(&q, c, m.Addr, outBufs[k][:0])
			}
			cnt.count(&q, resp)
			if resp == nil {
				continue
			}
			out[k].Buffers[0] = resp
			out[k].Addr = m.Addr
			k++
		}
		for sent := 0; sent < k; {
			w, err := bc.WriteBatch(out[sent:k], 0)
			if err != nil {
				if isClosed(err) {
					return
				}
				// One bad destination must not lose the rest of the batch.
				sent++
				continue
			}
			sent += w
		}
	}
}
