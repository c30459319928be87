package serve

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
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

// udpSocket is a UDP socket that Go's network poller never sees. A socket
// in the poller sits edge-triggered in its epoll set: every datagram wakes
// the thread waiting in epoll_wait, even while nobody reads, so a reader
// that sleeps to gather a batch (batchPacer) would save no wake-up. This
// one is watched by an epoll set of its own, registered one-shot: it wakes
// the poller once, when its reader has armed it to wait for the socket and
// parked; between two waits the datagrams wake nothing. That set is what
// the reader parks on through Go's poller, so waiting costs no thread and
// needs no extra P.
type udpSocket struct {
	f      *os.File // the socket: closed once no call uses it
	rc     syscall.RawConn
	ep     *os.File // its private epoll set, in Go's poller
	eprc   syscall.RawConn
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
	// Blocking, so that Go does not put it in its poller (every call
	// passes MSG_DONTWAIT).
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
	// The private epoll set, non-blocking so that Go polls it, with the
	// socket in it one-shot (armed: the first read waits on it).
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err == nil {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: int32(fd)}
		if err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err == nil {
			err = unix.SetNonblock(epfd, true)
		}
		if err != nil {
			unix.Close(epfd)
		}
	}
	if err != nil {
		unix.Close(fd)
		return fail("epoll", err)
	}
	s := &udpSocket{f: os.NewFile(uintptr(fd), "udp"), ep: os.NewFile(uintptr(epfd), "udp-epoll")}
	switch b := bound.(type) {
	case *unix.SockaddrInet4:
		s.local = net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4(b.Addr), uint16(b.Port)))
	case *unix.SockaddrInet6:
		s.local = net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom16(b.Addr).WithZone(ap.Addr().Zone()), uint16(b.Port)))
	}
	if s.rc, err = s.f.SyscallConn(); err == nil {
		s.eprc, err = s.ep.SyscallConn()
	}
	if err != nil {
		s.f.Close()
		s.ep.Close()
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

// Close closes the socket once no call uses it, and its epoll set, which
// wakes a reader parked on it.
func (s *udpSocket) Close() error {
	if s.closed.Swap(true) {
		return net.ErrClosed
	}
	s.ep.Close()
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
	armed bool          // the socket is armed in its epoll set
	// The system calls as RawConn callbacks, made once: a closure built
	// per call would be an allocation per batch. They leave their result
	// in n and errno; sent is where sendmmsg starts.
	recv, send, poll func(fd uintptr) bool
	arm              func(fd uintptr)
	n, sent          int
	errno            syscall.Errno
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
	// Raw calls: none of them blocks (MSG_DONTWAIT, a zero timeout), so
	// the scheduler need not hear of them.
	b.recv = func(fd uintptr) bool {
		r, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.in[0])), uintptr(len(b.in)), unix.MSG_DONTWAIT, 0, 0)
		b.n, b.errno = int(r), e
		return true
	}
	b.send = func(fd uintptr) bool {
		r, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.out[b.sent])), uintptr(b.nout-b.sent), unix.MSG_DONTWAIT, 0, 0)
		b.n, b.errno = int(r), e
		return true
	}
	// The socket's epoll set: its event (which disarms it) or, with none
	// yet, false, and Go parks the reader until the set is readable.
	var ev [1]unix.EpollEvent
	b.poll = func(fd uintptr) bool {
		r, _, _ := unix.RawSyscall6(unix.SYS_EPOLL_WAIT, fd, uintptr(unsafe.Pointer(&ev[0])), 1, 0, 0, 0)
		if int(r) > 0 {
			b.armed = false
			return true
		}
		return false
	}
	// Arms the socket (by its descriptor, read once: the set drops it
	// when it closes) in the set whose descriptor Control passes.
	var sfd uintptr
	sock.rc.Control(func(fd uintptr) { sfd = fd })
	armed := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: int32(sfd)}
	b.arm = func(efd uintptr) {
		_, _, b.errno = unix.RawSyscall6(unix.SYS_EPOLL_CTL, efd, unix.EPOLL_CTL_MOD, sfd, uintptr(unsafe.Pointer(&armed)), 0, 0)
	}
	b.armed = true // newUDPSocket registered it armed
	return b, nil
}

func (b *mmsgBatch) read() (int, error) {
	b.nout = 0
	if b.nap.Nsec != 0 {
		b.gather()
	}
	for {
		for i := range b.in {
			b.in[i].hdr.Namelen = unix.SizeofSockaddrInet6
			b.in[i].hdr.Flags = 0
		}
		err := b.sock.rc.Read(b.recv)
		if b.sock.closed.Load() {
			return 0, net.ErrClosed
		}
		if err != nil {
			return 0, err
		}
		switch b.errno {
		case 0:
			b.nap.Nsec = int64(b.pacer.next(b.n, time.Now()))
			return b.n, nil
		case unix.EAGAIN, unix.EINTR:
			if err := b.wait(); err != nil {
				if b.sock.closed.Load() {
					return 0, net.ErrClosed
				}
				return 0, err
			}
		default:
			return 0, b.errno
		}
	}
}

// wait parks the reader until the socket has a datagram: it arms the
// socket in its epoll set (a datagram already queued fires at once) and
// waits on the set through Go's poller.
func (b *mmsgBatch) wait() error {
	if !b.armed {
		b.errno = 0
		if err := b.sock.eprc.Control(b.arm); err != nil {
			return err
		}
		if b.errno != 0 {
			return b.errno
		}
		b.armed = true
	}
	return b.sock.eprc.Read(b.poll)
}

// gather sleeps the pacer's while before a busy socket's next read. It is
// a raw nanosleep, which Go takes for running code: the reader keeps its P
// through it, so that Go's monitor does not take the P back and wake a
// thread to run it (as it would from a system call it sees last over
// 20 µs), and the sleep is short. On one P the reader first lets the
// goroutines that are ready run (Gosched), since it does not park while
// the datagrams keep coming; the ones the network readies (a TCP client)
// Go's monitor finds within 10 ms. With more Ps they have the others.
func (b *mmsgBatch) gather() {
	if runtime.GOMAXPROCS(0) == 1 {
		runtime.Gosched()
	}
	unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&b.nap)), 0, 0)
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
