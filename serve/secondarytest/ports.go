package secondarytest

import (
	"fmt"
	"net"
	"strconv"
)

// FreePort returns a port that was free on 127.0.0.1 for both UDP and TCP
// a moment ago, for Config.Port (or a primary's own listener).
func FreePort() (int, error) { return freePort() }

// freePort returns a port that was free on 127.0.0.1 for both UDP and TCP
// a moment ago. The server may still lose a race for it; Start retries.
func freePort() (int, error) { return freePortOn("127.0.0.1") }

// FreePortOn is FreePort for another loopback address (Config.Address).
func FreePortOn(host string) (int, error) { return freePortOn(host) }

func freePortOn(host string) (int, error) {
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp4", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp4", net.JoinHostPort(host, strconv.Itoa(port)))
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		if port < 1024 {
			continue
		}
		return port, nil
	}
	return 0, fmt.Errorf("no free port on %s", host)
}

// portFree reports whether port can be bound on host, UDP and TCP.
func portFree(host string, port int) bool {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp4", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}
