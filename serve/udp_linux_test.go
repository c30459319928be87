package serve

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
)

// epollSets counts the process's open epoll descriptors.
func epollSets(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && l == "anon_inode:[eventpoll]" {
			n++
		}
	}
	return n
}

// Each socket has an epoll set of its own, and Close closes both.
func TestUDPSocketCloseClosesItsEpollSet(t *testing.T) {
	before := epollSets(t)
	conns, err := openUDP(netip.MustParseAddrPort("127.0.0.1:0"), 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := epollSets(t) - before; got != len(conns) {
		t.Errorf("%d sockets open: %d epoll sets more, want %d", len(conns), got, len(conns))
	}
	for _, c := range conns {
		c.Close()
	}
	if got := epollSets(t) - before; got != 0 {
		t.Errorf("the sockets closed: %d epoll sets left open", got)
	}
}

// A read returns a whole batch when more is queued, and the next read
// the rest.
func TestPacketBatchReadsWholeBatches(t *testing.T) {
	_, pb, cl := openBatch(t, "127.0.0.1:0")
	from := cl.LocalAddr().(*net.UDPAddr).AddrPort()
	for i := range udpBatch + 7 {
		fmt.Fprintf(cl, "q%d", i)
	}
	if got := echo(t, pb, from); len(got) != udpBatch {
		t.Errorf("first read: %d datagrams, want %d", len(got), udpBatch)
	}
	if got := echo(t, pb, from); len(got) != 7 {
		t.Errorf("second read: %d datagrams, want 7", len(got))
	}
}

// An answer the kernel refuses to send (here: to port 0) loses itself,
// not the answers queued after it.
func TestPacketBatchBadDestinationLosesOnlyItsAnswer(t *testing.T) {
	_, pb, cl := openBatch(t, "127.0.0.1:0")
	for i := range 4 {
		fmt.Fprintf(cl, "q%d", i)
	}
	n, err := pb.read()
	if err != nil || n != 4 {
		t.Fatalf("read: %d, %v", n, err)
	}
	mb := pb.(*mmsgBatch)
	for _, bad := range []int{0, 2} {
		mb.names[bad].Port = 0
	}
	for i := range n {
		msg, _ := pb.packet(i)
		pb.queue(i, append([]byte("re:"), msg...))
	}
	if err := pb.flush(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	for _, want := range []string{"re:q1", "re:q3"} {
		n, err := cl.Read(buf)
		if err != nil {
			t.Fatalf("waiting for %q: %v", want, err)
		}
		if string(buf[:n]) != want {
			t.Fatalf("answer %q, want %q", buf[:n], want)
		}
	}
	// Nothing came for the two refused: the next answer is the next
	// question's.
	fmt.Fprint(cl, "q4")
	echo(t, pb, cl.LocalAddr().(*net.UDPAddr).AddrPort())
	if n, err := cl.Read(buf); err != nil || string(buf[:n]) != "re:q4" {
		t.Errorf("after the refused answers: %q, %v, want %q", buf[:n], err, "re:q4")
	}
}
