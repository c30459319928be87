package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
	"github.com/tritondatacenter/cns/serve/secondarytest"
)

// BenchmarkAggregateRegion measures an aggregator (RFD 172) over three data
// centers of CNS_AGG_BENCH_VMS VMs each (default 10000); run it alone, once:
//
//	CNS_AGG_BENCH_VMS=10000 go test -run '^$' -bench AggregateRegion -benchtime 1x .
//
// the region
// zone's first build and the aggregator's memory, then one-VM changes in
// one data center: the time from the DC answering the new name to the
// aggregator answering it (NOTIFY → IXFR → merge → commit) and to a BIND
// secondary of the region answering it, and the region's IXFR size.
// BENCHMARKS.md reports it.
func BenchmarkAggregateRegion(b *testing.B) {
	t := b // the measurement runs once, whatever b.N
	vms, _ := strconv.Atoi(os.Getenv("CNS_AGG_BENCH_VMS"))
	if vms == 0 {
		vms = 10000
	}
	changes := 40
	if n, _ := strconv.Atoi(os.Getenv("CNS_AGG_BENCH_CHANGES")); n > 0 {
		changes = n
	}
	aggPort := aggFreePort(t)
	secPort := aggFreePort(t)
	var dcs []*aggDC
	for i := 1; i <= 3; i++ {
		inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: vms, Seed: uint64(i)})
		moveIPs(inv, byte(i))
		start := time.Now()
		dcs = append(dcs, startAggDC(t, i, inv, aggPort, false))
		t.Logf("DC %d: %d VMs served in %v", i, vms, time.Since(start).Round(time.Millisecond))
	}
	dir := t.TempDir()
	cfg := testConfig(t, dir, "", func(m map[string]any) {
		for _, k := range []string{"inventory_file", "forward_zones", "vmapi_opts", "cnapi_opts", "napi_opts", "ufds_opts", "changefeed_opts"} {
			delete(m, k)
		}
		m["my_name"] = "cns.us-west.example.com"
		m["dns_listen"] = []string{fmt.Sprintf("127.0.0.1:%d", aggPort)}
		m["also_notify"] = []string{fmt.Sprintf("127.0.0.1:%d", secPort)}
		m["min_notify_interval"] = 100
		var sources []any
		for _, dc := range dcs {
			sources = append(sources, map[string]any{"zone": dc.zone, "primaries": []string{dc.p.addr}})
		}
		m["aggregate"] = map[string]any{aggRegion: map[string]any{"sources": sources}}
	})
	// One known name per DC: the region is built when all three answer.
	last := func(dc *aggDC) string {
		vm := dc.inv.VMs[len(dc.inv.VMs)-1]
		return fmt.Sprintf("%s.inst.%s.%s", vm.UUID, vm.OwnerUUID, aggRegion)
	}
	start := time.Now()
	agg := startCNS(t, cfg)
	// Built: every source transferred, then a commit that left nothing
	// pending (chunks go in pseudo-UUID order, not the inventory's).
	transferred := 0
	agg.waitLog(10*time.Minute, func(l logLine) bool {
		if l.str("msg") == "aggregate: source transferred" {
			transferred++
		}
		return transferred == 3
	})
	mark := agg.mark()
	agg.waitLogFrom(mark, 10*time.Minute, func(l logLine) bool { return l.str("msg") == "committed" && l["pending"] == 0.0 })
	build := time.Since(start)
	for _, dc := range dcs {
		if name := last(dc); len(aggLookupA(agg.addr, name, dns.TypeA)) == 0 {
			t.Fatalf("built, but %s does not answer", name)
		}
	}
	rss, hwm := aggProcMemory(agg.cmd.Process.Pid)
	t.Logf("region first build: %v for 3 × %d VMs; aggregator RSS %d MiB, peak %d MiB", build.Round(time.Millisecond), vms, rss>>20, hwm>>20)
	for i, dc := range dcs {
		rss, hwm := aggProcMemory(dc.p.cmd.Process.Pid)
		t.Logf("for comparison, DC %d (%d VMs): RSS %d MiB, peak %d MiB", i+1, vms, rss>>20, hwm>>20)
	}

	var sec *secondarytest.Secondary
	if secondarytest.Available(secondarytest.BIND) == nil {
		sec = secondarytest.Start(t, secondarytest.Config{Kind: secondarytest.BIND, Primary: agg.addr, Zones: []string{aggRegion}, Dir: t.TempDir(), Port: secPort})
		if err := sec.WaitSerial(aggRegion, soaSerial(t, agg, aggRegion), 10*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	var toAgg, toSec []time.Duration
	var ixfrBytes []int
	dc := dcs[0]
	for n := range changes {
		from := soaSerial(t, agg, aggRegion)
		alias := fmt.Sprintf("bench%d", n)
		ip := fmt.Sprintf("10.1.250.%d", n+1)
		name := addBenchVM(t, dc, 1000+n, alias, ip)
		dcName := strings.Replace(name, aggRegion, dc.zone, 1)
		waitFor(t, dcName, time.Minute, func() bool { return len(aggLookupA(dc.p.addr, dcName, dns.TypeA)) > 0 })
		t1 := time.Now()
		waitFor(t, name, time.Minute, func() bool { return len(aggLookupA(agg.addr, name, dns.TypeA)) > 0 })
		toAgg = append(toAgg, time.Since(t1))
		if sec != nil {
			waitFor(t, "bind "+name, time.Minute, func() bool { return len(aggLookupA(sec.Addr(), name, dns.TypeA)) > 0 })
			toSec = append(toSec, time.Since(t1))
		}
		ixfrBytes = append(ixfrBytes, aggIXFRSize(t, agg.addr, aggRegion, from))
		time.Sleep(150 * time.Millisecond) // past the NOTIFY interval: each change is its own serial
	}
	t.Logf("DC answers → aggregator answers: %s", aggPercentiles(toAgg))
	if sec != nil {
		t.Logf("DC answers → BIND secondary of the region answers: %s", aggPercentiles(toSec))
	}
	rss, hwm = aggProcMemory(agg.cmd.Process.Pid)
	t.Logf("aggregator after the changes: RSS %d MiB, peak %d MiB", rss>>20, hwm>>20)
	slices.Sort(ixfrBytes)
	t.Logf("region IXFR for a one-VM change: median %d bytes, max %d bytes", ixfrBytes[len(ixfrBytes)/2], ixfrBytes[len(ixfrBytes)-1])
}

// addBenchVM adds one VM to a DC and returns its region name (by alias,
// under the owner's UUID).
func addBenchVM(t testing.TB, dc *aggDC, n int, alias, ip string) string {
	owner := dc.inv.Users[0]
	dc.inv.VMs = append(dc.inv.VMs, interopVM(dc.inv, n, owner.UUID, alias, ip, ""))
	writeInventory(t, dc.path, dc.inv)
	return fmt.Sprintf("%s.inst.%s.%s", alias, owner.UUID, aggRegion)
}

func aggPercentiles(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return fmt.Sprintf("n=%d p50 %v p90 %v p99 %v max %v", len(s), at(0.5).Round(time.Millisecond/10),
		at(0.9).Round(time.Millisecond/10), at(0.99).Round(time.Millisecond/10), s[len(s)-1].Round(time.Millisecond/10))
}

// aggIXFRSize is the wire size of the IXFR of zone from serial.
func aggIXFRSize(t testing.TB, addr, zone string, from uint32) int {
	t.Helper()
	co, err := dns.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	m := new(dns.Msg)
	m.SetIxfr(dns.Fqdn(zone), from, ".", ".")
	if err := co.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	total, soas, first := 0, 0, uint32(0)
	for {
		co.SetReadDeadline(time.Now().Add(10 * time.Second))
		r, err := co.ReadMsg()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := r.Pack()
		total += len(b)
		for _, rr := range r.Answer {
			if soa, ok := rr.(*dns.SOA); ok {
				if soas == 0 {
					first = soa.Serial
				}
				soas++
			}
		}
		if n := len(r.Answer); n == 0 || soas == 1 && n == 1 {
			return total // up to date
		}
		if soa, ok := r.Answer[len(r.Answer)-1].(*dns.SOA); ok && soas > 1 && soa.Serial == first {
			return total
		}
	}
}

// aggProcMemory reads a process's resident and peak resident memory.
func aggProcMemory(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v << 10
		case "VmHWM:":
			hwm = v << 10
		}
	}
	return rss, hwm
}
