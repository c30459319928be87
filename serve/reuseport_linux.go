package serve

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

const reusePortSupported = true

// reusePortControl sets SO_REUSEPORT so several sockets share one port and
// the kernel balances datagrams over them, and asks for a large receive
// buffer: a burst of queries waits in the kernel instead of being dropped
// (SO_RCVBUFFORCE when privileged, else as much as net.core.rmem_max
// allows).
func reusePortControl(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		if strings.HasPrefix(network, "udp") {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, udpReceiveBuffer) != nil {
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, udpReceiveBuffer)
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}
