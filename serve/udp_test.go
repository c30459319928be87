package serve

import (
	"net/netip"
	"runtime"
	"testing"
)

// By default a UDP address gets one socket per CPU cns may run on, not
// one per P: more Ps than CPUs (GOMAXPROCS=2 on one CPU) add no socket.
func TestListenUDPOneSocketPerCPU(t *testing.T) {
	if !reusePortSupported {
		t.Skip("no SO_REUSEPORT: one socket whatever the CPUs")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	cpus := runtime.NumCPU()
	for _, procs := range []int{1, cpus, cpus + 1} {
		runtime.GOMAXPROCS(procs)
		conns, err := listenUDP(netip.MustParseAddrPort("127.0.0.1:0"), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range conns {
			c.Close()
		}
		if want := min(procs, cpus); len(conns) != want {
			t.Errorf("%d Ps on %d CPUs: %d sockets, want %d", procs, cpus, len(conns), want)
		}
	}
}
