//go:build !linux

package serve

import "syscall"

// reusePortSupported is false where SO_REUSEPORT does not balance load
// (illumos has no such option): one socket is read by one goroutine.
const reusePortSupported = false

func reusePortControl(network, address string, c syscall.RawConn) error { return nil }
