//go:build !linux

package serve

import "syscall"

// reusePortSupported is false where SO_REUSEPORT does not balance load
// (illumos has no such option): one socket is read by one goroutine.
const reusePortSupported = false

// reusePortControl asks for a large UDP receive buffer; the kernel clamps
// it to what it allows.
func reusePortControl(network, address string, c syscall.RawConn) error {
	if network == "udp" || network == "udp4" || network == "udp6" {
		c.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, udpReceiveBuffer)
		})
	}
	return nil
}
