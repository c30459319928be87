package secondarytest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreePort returns a port that was free on 127.0.0.1 for both UDP and TCP
// a moment ago, for Config.Port (or a primary's own listener).
func FreePort() (int, error) { return freePort() }

// freePort returns a port that was free on 127.0.0.1 for both UDP and TCP
// a moment ago. The server may still lose a race for it; Start retries
// when it picked the port itself.
func freePort() (int, error) { return freePortOn("127.0.0.1") }

// FreePortOn is FreePort for another loopback address (Config.Address).
func FreePortOn(host string) (int, error) { return freePortOn(host) }

func freePortOn(host string) (int, error) {
	// Below the kernel's ephemeral range first: a port the kernel handed
	// out for :0 is the kind it hands out again, to any process's next
	// outgoing connection, and a secondary whose port was picked ahead
	// (also_notify names it before it starts) then finds it taken (seen
	// in CI: "knot could not listen", tests of other packages running
	// beside it).
	if low := ephemeralLow(); low > belowEphemeral {
		for range 100 {
			if port := belowEphemeral + rand.IntN(low-belowEphemeral); portFree(host, port) {
				return port, nil
			}
		}
	}
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

// belowEphemeral is where freePortOn starts looking below the ephemeral
// range: above the ports system services are usually configured on.
const belowEphemeral = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (Linux:
// net.ipv4.ip_local_port_range), 0 when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return low
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
