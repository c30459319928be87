package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// Benchmarks of the SDC feed against the simulator. Run them one at a
// time, once:
//
//	go test -run '^$' -bench SDCInitialSync -benchtime 1x .
//	go test -run '^$' -bench SDCEventLatency -benchtime 1x .
//	go test -run '^$' -bench SDCEventDuringReconcile -benchtime 3x .
//	go test -run '^$' -bench SDCEventDuringFirstLoad -benchtime 3x .

// BenchmarkSDCInitialSync measures a first start against a data center of
// 10k and 100k VMs: from an empty db to every record committed and
// answered. The simulator runs as its own process (`cns sim`), so the
// heap figures are cns's alone.
func BenchmarkSDCInitialSync(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("vms=%dk", n/1000), func(b *testing.B) {
			inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: n, Seed: 1})
			dir := b.TempDir()
			invPath := filepath.Join(dir, "dc.json")
			data, err := json.Marshal(inv)
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(invPath, data, 0o644); err != nil {
				b.Fatal(err)
			}
			keys := runSimProcess(b, invPath)
			fc := benchFeedConfig(b, keys)
			last := inv.VMs[len(inv.VMs)-1]
			lastName := last.UUID + ".inst." + last.OwnerUUID + "." + cnsZone
			lastIP := last.NICs[0].IP

			for i := 0; i < b.N; i++ {
				runtime.GC()
				var base runtime.MemStats
				runtime.ReadMemStats(&base)
				peak := sampleHeap()
				start := time.Now()
				c := startSDCCNS(b, filepath.Join(dir, fmt.Sprintf("cns%d.db", i)), fc)
				waitFor(b, "the full listing", 10*time.Minute, func() bool { return c.feed.Status().FullSyncs > 0 })
				listed := time.Since(start)
				listingHeap := peak.max.Load() // the feed's part: listing, lookups, SetInventory
				c.synced(10 * time.Minute)
				waitFor(b, "the last VM's name", time.Minute, func() bool { return c.hasA(lastName, lastIP) })
				took := time.Since(start)
				peakHeap := peak.stop()
				runtime.GC()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				st := c.feed.Status()
				c.stop()

				b.ReportMetric(took.Seconds(), "s/sync")
				b.ReportMetric(float64(peakHeap-base.HeapAlloc)/(1<<20), "MiB-peak-heap")
				b.ReportMetric(float64(after.HeapAlloc-base.HeapAlloc)/(1<<20), "MiB-live-heap")
				b.ReportMetric(listed.Seconds(), "s/listing")
				b.ReportMetric(float64(listingHeap-base.HeapAlloc)/(1<<20), "MiB-listing-peak-heap")
				b.Logf("%d VMs: listing applied in %v (VMAPI and UFDS %v of it; heap peak +%.0f MiB), "+
					"all committed and answered in %v (heap peak +%.0f MiB); live heap after sync +%.0f MiB",
					n, listed.Round(time.Millisecond), st.LastFullSyncTook.Round(time.Millisecond),
					float64(listingHeap-base.HeapAlloc)/(1<<20), took.Round(time.Millisecond),
					float64(peakHeap-base.HeapAlloc)/(1<<20), float64(after.HeapAlloc-base.HeapAlloc)/(1<<20))
			}
		})
	}
}

// runSimProcess starts `cns sim --inventory path` and returns the config
// keys it prints.
func runSimProcess(b *testing.B, path string) map[string]json.RawMessage {
	b.Helper()
	cmd := exec.Command(cnsBin(b), "sim", "--inventory", path, "--log-level", "warn")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		io.Copy(io.Discard, out)
	}()
	var keys map[string]json.RawMessage
	select {
	case l := <-line:
		if err := json.Unmarshal([]byte(l), &keys); err != nil {
			b.Fatalf("cns sim: %q", l)
		}
	case <-time.After(5 * time.Minute):
		b.Fatal("cns sim did not start")
	}
	return keys
}

func benchFeedConfig(b *testing.B, keys map[string]json.RawMessage) sdcSetup {
	// The production defaults, except that nothing periodic interferes.
	return sdcSetup{keys: keys, Config: sdc.Config{FullPollInterval: time.Hour, FallbackPollInterval: time.Hour}}
}

// heapSampler records the largest HeapAlloc seen.
type heapSampler struct {
	max  atomic.Uint64
	quit chan struct{}
	wg   sync.WaitGroup
}

func sampleHeap() *heapSampler {
	h := &heapSampler{quit: make(chan struct{})}
	h.wg.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > h.max.Load() {
				h.max.Store(m.HeapAlloc)
			}
			select {
			case <-h.quit:
				return
			case <-t.C:
			}
		}
	})
	return h
}

func (h *heapSampler) stop() uint64 {
	close(h.quit)
	h.wg.Wait()
	return h.max.Load()
}

// BenchmarkSDCEventLatency measures changefeed event → DNS answer: an
// alias change in the simulator, then DNS queries every millisecond until
// the new name answers; 250 events one after the other, on a 10k-VM and
// a 100k-VM data center, with the resourceObject of newer VMAPIs and with
// the GET older ones need, and with a 10 ms batch window to show the
// pipeline's own cost. The simulator delivers at once (VMAPI's publisher
// adds its 0–2 s sweep before cns sees anything).
func BenchmarkSDCEventLatency(b *testing.B) {
	for _, tc := range []struct {
		name      string
		vms       int
		resObject bool
		window    time.Duration
	}{
		{"vms=10k/resourceObject", 10_000, true, 0},
		{"vms=10k/GET", 10_000, false, 0},
		{"vms=10k/GET/window=10ms", 10_000, false, 10 * time.Millisecond},
		{"vms=100k/resourceObject", 100_000, true, 0},
		{"vms=100k/GET", 100_000, false, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			inv, sim, logins := eventSim(b, tc.vms, tc.resObject)
			fc := testFeedConfig(b, sim)
			c := startSDCCNSWith(b, filepath.Join(b.TempDir(), "cns.db"), fc, feeds.Options{BatchWindow: tc.window})
			c.synced(10 * time.Minute)

			const events = 250
			for i := 0; i < b.N; i++ {
				var lat []time.Duration
				for e := range events {
					vm := inv.VMs[(e*7919)%len(inv.VMs)]
					lat = append(lat, aliasEvent(b, sim, c, vm, fmt.Sprintf("lat%d-%d", i, e), logins[vm.OwnerUUID], 10*time.Second))
				}
				slices.Sort(lat)
				p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
				b.ReportMetric(float64(p50.Microseconds())/1000, "ms-p50")
				b.ReportMetric(float64(p99.Microseconds())/1000, "ms-p99")
				b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "ms-max")
				b.Logf("%s: %d events, event → answer p50 %v, p99 %v, max %v", tc.name, events,
					p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond), lat[len(lat)-1].Round(100*time.Microsecond))
			}
			if !strings.Contains(tc.name, "GET") && c.feed.Status().Applied == 0 {
				b.Error("no change applied")
			}
		})
	}
}

// eventSim runs a simulator of a generated data center of vms VMs (closed
// when b ends) and returns its inventory and its users' logins by UUID.
func eventSim(b *testing.B, vms int, resourceObject bool) (*dc.Inventory, *sdcsim.Sim, map[string]string) {
	b.Helper()
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: vms, Seed: 1})
	sim, err := sdcsim.New(*inv, sdcsim.Options{ResourceObject: resourceObject, PlainLDAPInConfig: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sim.Close() })
	logins := map[string]string{}
	for _, u := range inv.Users {
		logins[u.UUID] = u.Login
	}
	return inv, sim, logins
}

// aliasEvent gives vm the alias in the simulator and returns how long
// until cns answers the new name (asked every millisecond), failing b
// after timeout.
func aliasEvent(b *testing.B, sim *sdcsim.Sim, c *sdcCNS, vm dc.VM, alias, login string, timeout time.Duration) time.Duration {
	b.Helper()
	name := alias + ".inst." + login + "." + cnsZone
	sent := time.Now()
	if err := sim.SetAlias(vm.UUID, alias); err != nil {
		b.Fatal(err)
	}
	for !c.hasA(name, vm.NICs[0].IP) {
		if time.Since(sent) > timeout {
			b.Fatalf("%s never answered", name)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(sent)
}

// BenchmarkSDCEventDuringReconcile measures changefeed event → DNS answer
// while a restart's reconcile runs: cns restarts on the db of a synced
// 100k-VM data center, and from the moment its listing is applied until
// every VM has been found as stored, alias changes are made one after the
// other, each answered before the next. It reports how many events the
// reconcile let through, their p50 and worst latency, and how long the
// reconcile took.
func BenchmarkSDCEventDuringReconcile(b *testing.B) {
	benchEventsDuringBacklog(b, false)
}

// BenchmarkSDCEventDuringFirstLoad is BenchmarkSDCEventDuringReconcile
// for a first start: each run on a fresh db, its chunks committed while
// the events come.
func BenchmarkSDCEventDuringFirstLoad(b *testing.B) {
	benchEventsDuringBacklog(b, true)
}

// benchEventsDuringBacklog makes alias changes one after the other, each
// answered before the next, from the moment cns's listing is applied
// until nothing is pending: on a fresh db (fresh) or on the db of the
// synced data center.
func benchEventsDuringBacklog(b *testing.B, fresh bool) {
	const vms = 100_000
	inv, sim, logins := eventSim(b, vms, true)
	fc := testFeedConfig(b, sim)
	dir := b.TempDir()
	path := filepath.Join(dir, "cns.db")
	what := "reconcile"
	if fresh {
		what = "first load"
	} else {
		c := startSDCCNSWith(b, path, fc, feeds.Options{})
		c.synced(10 * time.Minute)
		c.stop()
	}

	for i := 0; i < b.N; i++ {
		if fresh {
			path = filepath.Join(dir, fmt.Sprintf("cns%d.db", i))
		}
		c := startSDCCNSWith(b, path, fc, feeds.Options{})
		waitFor(b, "the listing", 5*time.Minute, func() bool { return c.feed.Status().FullSyncs > 0 })
		start := time.Now()
		var lat []time.Duration
		for e := 0; e == 0 || c.updater.Pending() > 0; e++ {
			vm := inv.VMs[(e*7919)%len(inv.VMs)]
			lat = append(lat, aliasEvent(b, sim, c, vm, fmt.Sprintf("ev%d-%d", i, e), logins[vm.OwnerUUID], 5*time.Minute))
		}
		took := time.Since(start)
		c.stop()
		slices.Sort(lat)
		p50, worst := lat[len(lat)/2], lat[len(lat)-1]
		b.ReportMetric(float64(len(lat)), "events")
		b.ReportMetric(float64(p50.Microseconds())/1000, "ms-p50")
		b.ReportMetric(float64(worst.Microseconds())/1000, "ms-max")
		b.ReportMetric(took.Seconds(), "s/backlog")
		b.Logf("%d VMs: the %s took %v after the listing; %d events during it, event → answer p50 %v, max %v",
			vms, what, took.Round(time.Millisecond), len(lat), p50.Round(100*time.Microsecond), worst.Round(100*time.Microsecond))
	}
}
