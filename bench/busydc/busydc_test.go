// Package busydc measures cns in a busy data center:
// while cns answers at half of its capped capacity, the SDC simulator
// publishes 1,000 VM changes a second on its changefeed, and real
// secondaries (Knot, NSD) follow by NOTIFY and IXFR. bench/busydc.sh runs
// it; see there for the knobs and the outputs.
//
// It is a benchmark so that it can start the secondaries the way the
// tests do (serve/secondarytest); it runs once:
//
//	CNS_BIN=/path/to/cns go test -run '^$' -bench BusyDC -benchtime 1x ./bench/busydc
package busydc

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
	"github.com/tritondatacenter/cns/serve/secondarytest"
)

const zone = "dc.cns.example"

// knobs are the environment's settings (bench/busydc.sh documents them).
type knobs struct {
	vms, churnRate, sample      int
	duration, probeTime         time.Duration
	rate, probeRate             float64
	secondaries                 []secondarytest.Kind
	cnsBin, launcher, cnsCPU    string
	secondaryCPU, out           string
	batchWindow, minNotify      string
	reversePrefix, cgroup       string
	profile                     time.Duration
	seed                        uint64
	changeTimeout, probePoll    time.Duration
	secondaryPoll, secondaryMax time.Duration
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envStr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func readKnobs(b *testing.B) knobs {
	k := knobs{
		vms:           envInt("VMS", 20000),
		churnRate:     envInt("CHURN", 1000),
		sample:        envInt("SAMPLE", 20),
		duration:      time.Duration(envInt("DURATION", 60)) * time.Second,
		probeTime:     time.Duration(envInt("PROBE_SECONDS", 4)) * time.Second,
		rate:          float64(envInt("RATE", 0)),
		probeRate:     float64(envInt("PROBE_RATE", 150000)),
		cnsBin:        os.Getenv("CNS_BIN"),
		launcher:      os.Getenv("CNS_LAUNCHER"),
		cnsCPU:        envStr("SERVER_CPU", "0"),
		secondaryCPU:  envStr("SECONDARY_CPU", "0"),
		out:           os.Getenv("OUT"),
		batchWindow:   os.Getenv("BATCH_WINDOW_MS"),
		minNotify:     os.Getenv("MIN_NOTIFY_MS"),
		reversePrefix: os.Getenv("REVERSE_V4_PREFIX"),
		cgroup:        os.Getenv("CNS_CGROUP"),
		profile:       time.Duration(envInt("PROFILE", 0)) * time.Second,
		seed:          uint64(envInt("SEED", 20261124)),
		changeTimeout: 10 * time.Second,
		probePoll:     2 * time.Millisecond,
		secondaryPoll: 10 * time.Millisecond,
		secondaryMax:  30 * time.Second,
	}
	for _, s := range strings.Fields(envStr("SECONDARIES", "knot nsd")) {
		k.secondaries = append(k.secondaries, secondarytest.Kind(s))
	}
	if k.cnsBin == "" {
		b.Fatal("CNS_BIN (the cns binary to run) is not set: run bench/busydc.sh")
	}
	if k.out == "" {
		k.out = b.TempDir()
	}
	return k
}

func BenchmarkBusyDC(b *testing.B) {
	k := readKnobs(b)
	// The load generator's five threads are locked to themselves and come
	// back from every syscall needing a P: pinned to one CPU, Go would
	// give the driver one P, and they would queue behind the simulator and
	// the probes for it. The kernel shares the CPU among them instead.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(16, runtime.GOMAXPROCS(0))))
	b.Logf("load average at start: %s", loadAvg())
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: k.vms, Seed: k.seed})
	// VMAPI from 2020-11 on sends the VM with each change; delivery at
	// once (VMAPI's publisher sweeps every 2 s: its delay is not cns's and
	// is left out, so change → answer runs from the moment of publishing).
	sim, err := sdcsim.New(*inv, sdcsim.Options{ResourceObject: true, PlainLDAPInConfig: true})
	if err != nil {
		b.Fatal(err)
	}
	defer sim.Close()

	c := startCNS(b, k, sim, len(k.secondaries))
	start := time.Now()
	last := inv.VMs[len(inv.VMs)-1]
	c.waitSynced(b, fmt.Sprintf("%s.inst.%s.%s.", last.UUID, last.OwnerUUID, zone), last.NICs[0].IP, 15*time.Minute)
	b.Logf("%d VMs listed and committed in %v", k.vms, time.Since(start).Round(time.Millisecond))

	var secs []*secondarytest.Secondary
	for i, kind := range k.secondaries {
		secs = append(secs, startSecondary(b, k, kind, c, c.notifyPorts[i]))
	}

	g, err := newLoadGen(c.dns, queryMix(inv, k.seed))
	if err != nil {
		b.Fatal(err)
	}
	defer g.close()

	// Half of the capped capacity: first saturate cns for a few seconds.
	cpu0 := c.cpuSeconds()
	probe := total(g.run(k.probeRate, k.probeTime))
	probeCPU := c.cpuSeconds() - cpu0
	capacity := float64(probe.answered) / k.probeTime.Seconds()
	rate := k.rate
	if rate == 0 {
		rate = capacity / 2
	}
	b.Logf("saturation probe: offered %.0f qps for %v, answered %.0f qps (cns CPU %.0f %%): load rate %.0f qps",
		k.probeRate, k.probeTime, capacity, 100*probeCPU/k.probeTime.Seconds(), rate)
	if float64(probe.answered) > 0.95*float64(probe.sent) {
		b.Logf("WARNING: the probe did not saturate cns (answered %d of %d): its capacity is higher than %.0f qps", probe.answered, probe.sent, capacity)
	}

	r := &run{k: k, c: c, secs: secs, rate: rate, capacity: capacity, probeCPU: probeCPU / k.probeTime.Seconds()}
	r.quiet = r.phase(b, g, nil)
	ch := newChurn(sim, inv, zone, k.seed)
	r.busy = r.phase(b, g, ch)
	r.report(b)
}

// queryMix is the load's questions: services 50 %, instances by alias or
// uuid 40 %, names that do not exist 10 %.
func queryMix(inv *dc.Inventory, seed uint64) []dns.Question {
	rng := rand.New(rand.NewPCG(seed, 0x9e3))
	logins := map[string]string{}
	for _, u := range inv.Users {
		logins[u.UUID] = u.Login
	}
	var svcs, insts []string
	for _, vm := range inv.VMs {
		login := logins[vm.OwnerUUID]
		for _, s := range serviceNames(vm) {
			svcs = append(svcs, s+".svc."+login+"."+zone+".")
		}
		insts = append(insts, vm.UUID+".inst."+vm.OwnerUUID+"."+zone+".")
		if vm.Alias != nil {
			insts = append(insts, *vm.Alias+".inst."+login+"."+zone+".")
		}
	}
	qs := make([]dns.Question, 0, 8192)
	for i := range cap(qs) {
		var name string
		switch r := rng.IntN(100); {
		case r < 50 && len(svcs) > 0:
			name = svcs[rng.IntN(len(svcs))]
		case r < 90:
			name = insts[rng.IntN(len(insts))]
		default:
			name = fmt.Sprintf("nx%d.inst.%s.", i, zone)
		}
		qs = append(qs, dns.Question{Name: name, Qtype: dns.TypeA, Qclass: dns.ClassINET})
	}
	return qs
}

func startSecondary(b *testing.B, k knobs, kind secondarytest.Kind, c *cnsProc, port int) *secondarytest.Secondary {
	s := secondarytest.Start(b, secondarytest.Config{Kind: kind, Primary: c.dns.String(), Zones: []string{zone},
		Dir: filepath.Join(k.out, "secondaries"), Port: port, StartTimeout: time.Minute})
	// The secondaries share the server CPU, outside cns's quota (cns's
	// group has the larger share), not the load generator's.
	for _, pid := range groupPIDs(s.PID()) {
		if out, err := runCmd("taskset", "-a", "-p", "-c", k.secondaryCPU, strconv.Itoa(pid)); err != nil {
			b.Logf("taskset %s: %v %s", kind, err, out)
		}
	}
	serial := c.serial(b)
	if err := s.WaitSerial(zone, serial, 5*time.Minute); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s follows %s at serial %d", kind, c.dns, serial)
	return s
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func addrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
