package serve

import (
	"syscall"

	"golang.org/x/sys/unix"
)

const reusePortSupported = true

// reusePortControl sets SO_REUSEPORT so several sockets share one port and
// the kernel balances datagrams over them.
func reusePortControl(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
