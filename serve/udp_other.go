//go:build !linux

package serve

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// reusePortSupported is false where SO_REUSEPORT does not balance load
// (illumos has no such option): one socket is read by one goroutine.
const reusePortSupported = false

// openUDP binds one socket to ap, asking for a large receive buffer (the
// kernel clamps it to what it allows).
func openUDP(ap netip.AddrPort, _ int) ([]udpConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, udpReceiveBuffer)
		})
	}}
	c, err := lc.ListenPacket(context.Background(), "udp"+ipVersion(ap), ap.String())
	if err != nil {
		return nil, err
	}
	return []udpConn{c.(net.PacketConn)}, nil
}

// batchConn is the part of ipv4.PacketConn and ipv6.PacketConn used here;
// both take the same Message type.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// xnetBatch is packetBatch through golang.org/x/net, which moves one
// datagram per system call where the platform has no recvmmsg.
type xnetBatch struct {
	bc   batchConn
	in   []ipv4.Message
	out  []ipv4.Message
	nout int
}

func newPacketBatch(uc udpConn) (packetBatch, error) {
	c, ok := uc.(net.PacketConn)
	if !ok {
		return nil, fmt.Errorf("%T is not a net.PacketConn", uc)
	}
	b := &xnetBatch{in: make([]ipv4.Message, udpBatch), out: make([]ipv4.Message, udpBatch)}
	if ua, ok := c.LocalAddr().(*net.UDPAddr); ok && ua.IP.To4() == nil {
		b.bc = ipv6.NewPacketConn(c)
	} else {
		b.bc = ipv4.NewPacketConn(c)
	}
	for i := range b.in {
		b.in[i].Buffers = [][]byte{make([]byte, udpReadSize)}
		b.out[i].Buffers = [][]byte{nil}
	}
	return b, nil
}

func (b *xnetBatch) read() (int, error) {
	b.nout = 0
	return b.bc.ReadBatch(b.in, 0)
}

func (b *xnetBatch) packet(i int) ([]byte, netip.AddrPort) {
	m := &b.in[i]
	var src netip.AddrPort
	if ua, ok := m.Addr.(*net.UDPAddr); ok {
		src = ua.AddrPort()
	}
	return m.Buffers[0][:m.N], src
}

func (b *xnetBatch) queue(i int, p []byte) {
	b.out[b.nout].Buffers[0] = p
	b.out[b.nout].Addr = b.in[i].Addr
	b.nout++
}

func (b *xnetBatch) flush() error {
	for sent := 0; sent < b.nout; {
		w, err := b.bc.WriteBatch(b.out[sent:b.nout], 0)
		if err != nil {
			if isClosed(err) {
				return err
			}
			sent++ // one bad destination must not lose the rest
			continue
		}
		sent += w
	}
	b.nout = 0
	return nil
}
