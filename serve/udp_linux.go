package serve

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reusePortSupported: Linux balances datagrams over the sockets that
// share a port with SO_REUSEPORT.
const reusePortSupported = true

// udpSocket is a UDP socket that Go's network poller never sees: its
// reader blocks in recvmmsg itself, on its own thread, and while it sleeps
// to gather a batch (batchPacer) no datagram wakes anything. A socket in
// the poller is edge-triggered in its epoll set: every datagram wakes the
// thread waiting in epoll_wait, even while nobody reads, so sleeping to
// gather would save nothing; and a reader woken through the poller costs
// the scheduler's rounds and two more system calls (epoll_pwait, a
// recvmmsg that finds the socket empty) per wake-up.
//
// The reader's system calls go through syscall.Syscall, which lets Go
// run other goroutines on the reader's P meanwhile; that costs nothing
// when another P is idle, and cns serve keeps one more P than Go's
// default for that (main: spareP).
type udpSocket struct {
	f      *os.File // owns the descriptor: it is closed once no call uses it
	rc     syscall.RawConn
	local  *net.UDPAddr
	closed atomic.Bool
}

// openUDP binds n sockets to ap (the first picks the port when ap's is 0).
func openUDP(ap netip.AddrPort, n int) ([]udpConn, error) {
	var conns []udpConn
	for len(conns) < n {
		s, err := newUDPSocket(ap)
		if err != nil {
			if len(conns) > 0 {
				break // serve with what we have
			}
			return nil, err
		}
		ap = s.local.AddrPort()
		conns = append(conns, s)
	}
	return conns, nil
}

func newUDPSocket(ap netip.AddrPort) (*udpSocket, error) {
	fail := func(call string, err error) (*udpSocket, error) {
		return nil, &net.OpError{Op: "listen", Net: "udp" + ipVersion(ap), Addr: net.UDPAddrFromAddrPort(ap), Err: os.NewSyscallError(call, err)}
	}
	var family int
	var sa unix.Sockaddr
	if ipVersion(ap) == "4" {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().Unmap().As4()}
	} else {
		sa6 := &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
		if z := ap.Addr().Zone(); z != "" {
			if i, err := strconv.Atoi(z); err == nil {
				sa6.ZoneId = uint32(i)
			} else if ifi, err := net.InterfaceByName(z); err == nil {
				sa6.ZoneId = uint32(ifi.Index)
			} else {
				return fail("bind", err)
			}
		}
		family, sa = unix.AF_INET6, sa6
	}
	// Blocking, unlike Go's own sockets: the reader waits in recvmmsg.
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return fail("socket", err)
	}
	if family == unix.AF_INET6 {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
	}
	if err == nil {
		err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}
	// A burst waits in the kernel rather than being dropped while the
	// CPU is taken (SO_RCVBUFFORCE when privileged, else as much as
	// net.core.rmem_max allows).
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, udpReceiveBuffer) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, udpReceiveBuffer)
	}
	if err != nil {
		unix.Close(fd)
		return fail("setsockopt", err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return fail("bind", err)
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return fail("getsockname", err)
	}
	s := &udpSocket{f: os.NewFile(uintptr(fd), "udp")}
	switch b := bound.(type) {
	case *unix.SockaddrInet4:
		s.local = net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4(b.Addr), uint16(b.Port)))
	case *unix.SockaddrInet6:
		s.local = net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom16(b.Addr).WithZone(ap.Addr().Zone()), uint16(b.Port)))
	}
	if s.rc, err = s.f.SyscallConn(); err != nil {
		s.f.Close()
		return fail("socket", err)
	}
	return s, nil
}

func (s *udpSocket) LocalAddr() net.Addr { return s.local }

// WriteTo sends one datagram (a forwarded answer); it never blocks.
func (s *udpSocket) WriteTo(b []byte, to net.Addr) (int, error) {
	ua, ok := to.(*net.UDPAddr)
	if !ok {
		return 0, fmt.Errorf("udp: cannot send to %T", to)
	}
	ap := ua.AddrPort()
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	if s.local.IP.To4() != nil {
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().Unmap().As4()}
	}
	var serr error
	if err := s.rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, unix.MSG_DONTWAIT, sa)
		return true
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, os.NewSyscallError("sendto", serr)
	}
	return len(b), nil
}

// Close wakes the reader (a blocked recvmmsg does not notice close(2);
// shutdown(2) wakes it) and closes the descriptor once the reader is out.
func (s *udpSocket) Close() error {
	if s.closed.Swap(true) {
		return net.ErrClosed
	}
	s.rc.Control(func(fd uintptr) { unix.Shutdown(int(fd), unix.SHUT_RD) })
	return s.f.Close()
}

// mmsghdr is struct mmsghdr of recvmmsg(2) and sendmmsg(2).
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

// mmsgBatch is packetBatch with recvmmsg and sendmmsg called directly.
// golang.org/x/net's ReadBatch allocates a *net.UDPAddr for every
// datagram; here the senders' addresses stay in fixed sockaddr buffers,
// and an answer goes back to the very bytes its question came from.
type mmsgBatch struct {
	sock  *udpSocket
	in    []mmsghdr
	inIov []unix.Iovec
	bufs  [][]byte
	names []unix.RawSockaddrInet6 // large enough for either family
	out   []mmsghdr
	outIv []unix.Iovec
	nout  int
	pacer batchPacer
	nap   unix.Timespec // the sleep before the next read (0: none)
	// The system calls as RawConn callbacks, made once: a closure built
	// per call would be an allocation per batch. They leave their result
	// in n and errno; sent is where sendmmsg starts.
	recv, send func(fd uintptr) bool
	n, sent    int
	errno      syscall.Errno
}

func newPacketBatch(c udpConn) (packetBatch, error) {
	sock, ok := c.(*udpSocket)
	if !ok {
		return nil, fmt.Errorf("%T is not a socket of openUDP's", c)
	}
	b := &mmsgBatch{sock: sock, in: make([]mmsghdr, udpBatch), inIov: make([]unix.Iovec, udpBatch), bufs: make([][]byte, udpBatch),
		names: make([]unix.RawSockaddrInet6, udpBatch), out: make([]mmsghdr, udpBatch), outIv: make([]unix.Iovec, udpBatch)}
	for i := range b.in {
		b.bufs[i] = make([]byte, udpReadSize)
		b.inIov[i].Base = &b.bufs[i][0]
		b.inIov[i].SetLen(udpReadSize)
		b.in[i].hdr.Iov = &b.inIov[i]
		b.in[i].hdr.SetIovlen(1)
		b.in[i].hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
	}
	// Blocks until a datagram is queued, then takes what else is
	// (MSG_WAITFORONE). Go's signals restart it (SA_RESTART) but for the
	// odd EINTR.
	b.recv = func(fd uintptr) bool {
		for {
			r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.in[0])), uintptr(len(b.in)), unix.MSG_WAITFORONE, 0, 0)
			if e != unix.EINTR {
				b.n, b.errno = int(r), e
				return true
			}
		}
	}
	// sendmmsg never blocks (MSG_DONTWAIT): a raw call, which the
	// scheduler need not hear of.
	b.send = func(fd uintptr) bool {
		r, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.out[b.sent])), uintptr(b.nout-b.sent), unix.MSG_DONTWAIT, 0, 0)
		b.n, b.errno = int(r), e
		return true
	}
	return b, nil
}

func (b *mmsgBatch) read() (int, error) {
	b.nout = 0
	if b.nap.Nsec != 0 {
		// A raw call: the P stays with the reader through the sleep,
		// which is short. Go's monitor takes a P held in a system call
		// by a goroutine that has not been rescheduled for 10 ms (this
		// one never is), and then wakes every 20 µs for a millisecond;
		// a raw sleep is running code to it, which it preempts instead.
		unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&b.nap)), 0, 0)
	}
	for i := range b.in {
		b.in[i].hdr.Namelen = unix.SizeofSockaddrInet6
		b.in[i].hdr.Flags = 0
	}
	err := b.sock.rc.Read(b.recv)
	if b.sock.closed.Load() {
		return 0, net.ErrClosed // woken by Close, perhaps with empty reads
	}
	if err != nil {
		return 0, err
	}
	if b.errno != 0 {
		return 0, b.errno
	}
	b.nap.Nsec = int64(b.pacer.next(b.n, time.Now()))
	return b.n, nil
}

func (b *mmsgBatch) packet(i int) ([]byte, netip.AddrPort) {
	var src netip.AddrPort
	switch sa := &b.names[i]; sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		src = netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), networkPort(sa4.Port))
	case unix.AF_INET6:
		src = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), networkPort(sa.Port))
	}
	return b.bufs[i][:b.in[i].len], src
}

// networkPort reads a sockaddr's port, which is in network byte order.
func networkPort(p uint16) uint16 {
	bs := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(bs[0])<<8 | uint16(bs[1])
}

func (b *mmsgBatch) queue(i int, p []byte) {
	o := &b.out[b.nout]
	b.outIv[b.nout].Base = &p[0]
	b.outIv[b.nout].SetLen(len(p))
	o.hdr.Iov = &b.outIv[b.nout]
	o.hdr.SetIovlen(1)
	o.hdr.Name = b.in[i].hdr.Name
	o.hdr.Namelen = b.in[i].hdr.Namelen
	b.nout++
}

func (b *mmsgBatch) flush() error {
	for b.sent = 0; b.sent < b.nout; {
		if err := b.sock.rc.Write(b.send); err != nil {
			return err
		}
		if b.errno != 0 || b.n <= 0 {
			b.sent++ // one bad destination must not lose the rest
			continue
		}
		b.sent += b.n
	}
	b.nout = 0
	return nil
}
