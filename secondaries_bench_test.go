package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
	"github.com/tritondatacenter/cns/serve/secondarytest"
)

// Replication benchmarks against real secondaries. cns runs in-process
// (db, serve, updater) so a commit's moment is known exactly; each change
// is one new VM, committed with Updater.Flush. Run them one at a time:
//
//	go test -run '^$' -bench InteropPropagation -benchtime 1x .
//	go test -run '^$' -bench InteropIXFRBytes -benchtime 1x .

// benchCNS is cns in-process, built by the wiring cns serve uses. Its
// updater's batch window is an hour, so commits happen only when the
// benchmark flushes: a commit's moment is known exactly.
type benchCNS struct {
	*running
	log     *xfrLog
	commits sync.Map // "zone serial" → time.Time of the commit hook
}

// benchConfig is testdata/cns.json with the replication keys: TSIG bound
// to 127.0.0.1, one also_notify target per secondary port, and inv as the
// inventory file. It returns the config's path.
func benchConfig(b testing.TB, dir string, port int, notify []string, minNotifyMS int, inv *dc.Inventory) string {
	data, err := json.Marshal(inv)
	if err != nil {
		b.Fatal(err)
	}
	invPath := filepath.Join(dir, "inventory.json")
	if err := os.WriteFile(invPath, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return testConfig(b, dir, "", func(c map[string]any) {
		c["dns_listen"] = []string{fmt.Sprintf("127.0.0.1:%d", port)}
		c["inventory_file"] = invPath
		c["allow_transfer"] = []string{"127.0.0.1"}
		c["also_notify"] = notify
		c["tsig_keys"] = map[string]any{interopKey.Name: map[string]any{"algorithm": interopKey.Algorithm, "secret": interopKey.Secret}}
		c["peer_keys"] = map[string]any{"127.0.0.1": interopKey.Name}
		c["min_notify_interval"] = minNotifyMS
	})
}

// startBenchCNS starts cns on a fresh db with the config at cfgPath, waits
// for the file feed to hand its inventory (n VMs) to the updater, commits
// it and warms the zones.
func startBenchCNS(b testing.TB, cfgPath string, n int) *benchCNS {
	c := &benchCNS{log: &xfrLog{}}
	c.running = startServiceLogged(b, cfgPath, slog.New(c.log), serviceTuning{
		Updater: func(o *feeds.Options) { o.BatchWindow = time.Hour },
	})
	c.store.OnCommit(func(cm *db.Committed) {
		now := time.Now()
		for _, z := range cm.Zones {
			c.commits.Store(fmt.Sprintf("%s %d", z.Zone, z.Serial), now)
		}
	})
	start := time.Now()
	waitFor(b, "the inventory file to be read", time.Minute, func() bool { return len(c.updater.VMUUIDs()) == n })
	for c.updater.Pending() > 0 { // Flush commits one chunk of a large batch
		if err := c.updater.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.dns.Warm(); err != nil {
		b.Fatal(err)
	}
	b.Logf("cns: %d VMs committed and warm in %v", n, time.Since(start).Round(time.Millisecond))
	return c
}

// commit adds vm and commits; it returns the forward zone's new serial
// and the moment the commit hook saw it.
func (c *benchCNS) commit(b testing.TB, vm *dc.VM) (uint32, time.Time) {
	c.updater.SetVM(vm, "benchmark")
	if err := c.updater.Flush(); err != nil {
		b.Fatal(err)
	}
	if n := c.updater.Pending(); n > 0 {
		b.Fatalf("%d VMs still pending after a one-VM commit", n)
	}
	serial, ok := c.dns.ZoneSerial(demoZone)
	if !ok {
		b.Fatalf("cns does not serve %s", demoZone)
	}
	at, ok := c.commits.Load(fmt.Sprintf("%s %d", demoZone, serial))
	if !ok {
		b.Fatalf("no commit hook for %s serial %d", demoZone, serial)
	}
	return serial, at.(time.Time)
}

// trackedSeconds waits until cns's propagation tracking has seen the
// peer notified at port serve serial of the forward zone, and returns the
// time it recorded (commit to serving, as its SOA polls saw it).
func (c *benchCNS) trackedSeconds(serial uint32, port int, timeout time.Duration) (time.Duration, bool) {
	for start := time.Now(); time.Since(start) < timeout; time.Sleep(5 * time.Millisecond) {
		p, ok := c.dns.Propagation(demoZone, serial)
		if !ok {
			return 0, false
		}
		for _, pp := range p.Peers {
			if int(pp.Target.Port()) == port && pp.State == admin.StateActive {
				return time.Duration(pp.Seconds * float64(time.Second)), true
			}
		}
	}
	return 0, false
}

// xfrLog is a slog handler keeping cns's transfer log lines (and warnings,
// for failure messages).
type xfrLog struct {
	mu    sync.Mutex
	xfrs  []xfrRec
	warns []string
}

type xfrRec struct {
	zone, kind, client string
	serial             uint32
	bytes              int
	at                 time.Time // when cns logged it (the transfer was written)
}

func (h *xfrLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *xfrLog) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *xfrLog) WithGroup(string) slog.Handler                { return h }
func (h *xfrLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Level >= slog.LevelWarn {
		var sb strings.Builder
		sb.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&sb, " %s=%v", a.Key, a.Value); return true })
		h.warns = append(h.warns, sb.String())
	}
	if r.Message != "transfer" {
		return nil
	}
	x := xfrRec{at: r.Time}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "zone":
			x.zone = a.Value.String()
		case "kind":
			x.kind = a.Value.String()
		case "client":
			x.client = a.Value.String()
		case "serial":
			x.serial = uint32(attrInt(a.Value))
		case "bytes":
			x.bytes = int(attrInt(a.Value))
		}
		return true
	})
	h.xfrs = append(h.xfrs, x)
	return nil
}

func attrInt(v slog.Value) int64 {
	switch v.Kind() {
	case slog.KindInt64:
		return v.Int64()
	case slog.KindUint64:
		return int64(v.Uint64())
	}
	return -1
}

func (h *xfrLog) warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.warns)
}

func (h *xfrLog) since(n int) []xfrRec {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.xfrs[min(n, len(h.xfrs)):])
}

func (h *xfrLog) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.xfrs)
}

// benchVM is the n-th VM a benchmark adds: a fresh name, and the next
// address the generator would have given (so it lands in a reverse zone
// that exists: the secondaries have every zone from the start).
func benchVM(inv *dc.Inventory, n int) *dc.VM {
	i := len(inv.VMs) + 256 + n
	ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
	vm := interopVM(inv, 500000+n, inv.Users[0].UUID, fmt.Sprintf("bench%d", n), ip, "")
	return &vm
}

// zones lists every zone cns serves.
func (c *benchCNS) zones() []string {
	var out []string
	for _, z := range c.dns.Zones() {
		out = append(out, z.Name)
	}
	return out
}

// benchSecondaries starts one secondary per kind slaving every zone of c,
// on the ports given (the ones c notifies).
func benchSecondaries(b testing.TB, c *benchCNS, kinds []secondarytest.Kind, ports []int, stock bool) []*secondarytest.Secondary {
	var out []*secondarytest.Secondary
	for i, k := range kinds {
		key := interopKey
		out = append(out, secondarytest.Start(b, secondarytest.Config{Kind: k, Primary: c.addr,
			Zones: c.zones(), Key: &key, Dir: b.TempDir(), Port: ports[i], StartTimeout: time.Minute, StockRates: stock}))
	}
	return out
}

// waitAll waits until every secondary serves every zone at cns's serial.
func (c *benchCNS) waitAll(b testing.TB, secs []*secondarytest.Secondary, timeout time.Duration) {
	for _, z := range c.dns.Zones() {
		for _, s := range secs {
			if err := s.WaitSerial(z.Name, z.Serial, timeout); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchKinds(b *testing.B) []secondarytest.Kind {
	var kinds []secondarytest.Kind
	for _, k := range secondarytest.Kinds {
		if err := secondarytest.Available(k); err != nil {
			b.Logf("without %s: %v", k, err)
			continue
		}
		kinds = append(kinds, k)
	}
	if len(kinds) == 0 {
		b.Skip("no secondary DNS server installed (apt-get install bind9 knot nsd)")
	}
	return kinds
}

// answers reports whether s answers name with an A record.
func answers(s *secondarytest.Secondary, name string) bool {
	r, err := s.Query(name, dns.TypeA)
	return err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0
}

// percentile returns the p-th percentile (0..100) of sorted durations.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(p/100*float64(len(d)) + 0.5)
	return d[min(max(i-1, 0), len(d)-1)]
}

// BenchmarkInteropPropagation measures, per secondary, the time from a
// commit to the secondary answering the new name: 60 one-VM changes, each
// after the previous one has arrived and the NOTIFY interval (100 ms) has
// passed, on a 10k- and a 100k-VM data center. One cns per size; the
// secondaries take turns (each alone, so they do not share the 2 CPUs).
func BenchmarkInteropPropagation(b *testing.B) {
	const changes = 60
	const minNotify = 100 * time.Millisecond
	type variant struct {
		name  string
		kind  secondarytest.Kind
		stock bool // BIND with its default serial-query-rate (20/s)
		port  int
	}
	var variants []variant
	for _, k := range benchKinds(b) {
		variants = append(variants, variant{name: string(k), kind: k})
		if k == secondarytest.BIND {
			variants = append(variants, variant{name: "bind-stock-rates", kind: k, stock: true})
		}
	}
	for _, vms := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("vms=%dk", vms/1000), func(b *testing.B) {
			inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: vms, Seed: 1})
			cnsPort, _ := secondarytest.FreePort()
			var notify []string
			for i := range variants {
				variants[i].port, _ = secondarytest.FreePort()
				notify = append(notify, fmt.Sprintf("127.0.0.1:%d", variants[i].port))
			}
			c := startBenchCNS(b, benchConfig(b, b.TempDir(), cnsPort, notify, int(minNotify/time.Millisecond), inv), len(inv.VMs))
			next := 0 // VMs added so far: every change is a new VM
			for _, v := range variants {
				b.Run(v.name, func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						start := time.Now()
						s := benchSecondaries(b, c, []secondarytest.Kind{v.kind}, []int{v.port}, v.stock)[0]
						c.waitAll(b, []*secondarytest.Secondary{s}, 5*time.Minute)
						b.Logf("%s: %d zones transferred in %v", v.name, len(c.zones()), time.Since(start).Round(time.Millisecond))
						seen := len(s.Transfers())
						b.StartTimer()
						var lat, tracked []time.Duration
						for range changes {
							vm := benchVM(inv, next)
							next++
							name := fmt.Sprintf("%s.inst.%s.%s", vm.UUID, vm.OwnerUUID, demoZone)
							serial, at := c.commit(b, vm)
							for !answers(s, name) {
								if time.Since(at) > 30*time.Second {
									b.Fatalf("%s did not answer %s within 30 s of the commit\n%s\ncns warnings: %v", v.name, name, tailLines(s.Log(), 40), c.log.warnings())
								}
								time.Sleep(time.Millisecond)
							}
							lat = append(lat, time.Since(at))
							if d, ok := c.trackedSeconds(serial, v.port, 10*time.Second); ok {
								tracked = append(tracked, d)
							}
							time.Sleep(minNotify) // the next change gets its own NOTIFY at once
						}
						b.StopTimer()
						slices.Sort(lat)
						p50, p99 := percentile(lat, 50), percentile(lat, 99)
						b.ReportMetric(float64(p50)/1e6, "ms-p50")
						b.ReportMetric(float64(p99)/1e6, "ms-p99")
						b.ReportMetric(float64(lat[len(lat)-1])/1e6, "ms-max")
						b.Logf("%s, %d VMs: commit → answer over %d changes: p50 %v, p99 %v, max %v (min %v)", v.name, vms, len(lat),
							p50.Round(time.Microsecond), p99.Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond), lat[0].Round(time.Microsecond))
						slices.Sort(tracked)
						if len(tracked) > 0 {
							b.ReportMetric(float64(percentile(tracked, 50))/1e6, "ms-tracked-p50")
						}
						b.Logf("%s, %d VMs: the same as cns's propagation tracking saw it (SOA polls), %d of %d serials ACTIVE for this peer: p50 %v, p99 %v",
							v.name, vms, len(tracked), len(lat), percentile(tracked, 50).Round(time.Millisecond), percentile(tracked, 99).Round(time.Millisecond))
						var took []time.Duration
						for _, x := range s.Transfers()[seen:] {
							if x.Zone == demoZone && x.Type != "AXFR" {
								took = append(took, x.Took)
							}
						}
						slices.Sort(took)
						b.Logf("%s, %d VMs: its own account of an incremental update of %s: p50 %v, max %v over %d", v.name, vms, demoZone,
							percentile(took, 50), percentile(took, 100), len(took))
						s.Stop()
					}
				})
			}
			c.stop()
		})
	}
}

// BenchmarkInteropIXFRBytes measures the IXFR cns sends for a one-VM
// change on a 10k- and a 100k-VM zone, to every installed secondary at
// once, as cns counts the bytes and as each secondary does; every one
// must go out as an IXFR. TestInteropOneVMChangeIsIXFR is its CI form.
func BenchmarkInteropIXFRBytes(b *testing.B) {
	kinds := benchKinds(b)
	for _, vms := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("vms=%dk", vms/1000), func(b *testing.B) {
			inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: vms, Seed: 1})
			for i := 0; i < b.N; i++ {
				r := oneVMChanges(b, kinds, inv, 5)
				b.ReportMetric(float64(r.median()), "IXFR-bytes")
				b.ReportMetric(float64(r.axfrBytes), "AXFR-bytes")
			}
		})
	}
}

// The at-scale check of BenchmarkInteropIXFRBytes, sized for CI: on a
// 2,000-VM data center, a one-VM change goes to every secondary as an
// IXFR, smaller than the zone's AXFR.
func TestInteropOneVMChangeIsIXFR(t *testing.T) {
	kinds := interopKinds(t)
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 2000, Seed: 1})
	r := oneVMChanges(t, kinds, inv, 3)
	if want := 3 * len(kinds); len(r.cnsBytes) != want {
		t.Errorf("cns logged %d IXFRs of the changes, want %d (3 changes, %d secondaries)", len(r.cnsBytes), want, len(kinds))
	}
	if m := r.median(); m <= 0 || m >= r.axfrBytes/10 {
		t.Errorf("a one-VM change's IXFR is %d bytes; the AXFR is %d", m, r.axfrBytes)
	}
}

// ixfrBytes is what oneVMChanges saw: the bytes of each IXFR cns sent for
// a change (as it logs them), those each secondary counted, and the size
// of the zone's first AXFR.
type ixfrBytes struct {
	cnsBytes  []int
	perKind   map[secondarytest.Kind][]int
	axfrBytes int
}

func (r ixfrBytes) median() int {
	if len(r.cnsBytes) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(r.cnsBytes))
	return s[len(s)/2]
}

// oneVMChanges serves inv from an in-process cns to a secondary of each
// kind, then makes `changes` one-VM changes, each waited for on every
// secondary; a change that goes out as anything but an IXFR fails tb.
func oneVMChanges(tb testing.TB, kinds []secondarytest.Kind, inv *dc.Inventory, changes int) ixfrBytes {
	vms := len(inv.VMs)
	dir := tb.TempDir()
	cnsPort, _ := secondarytest.FreePort()
	var ports []int
	var notify []string
	for range kinds {
		p, _ := secondarytest.FreePort()
		ports = append(ports, p)
		notify = append(notify, fmt.Sprintf("127.0.0.1:%d", p))
	}
	c := startBenchCNS(tb, benchConfig(tb, dir, cnsPort, notify, 100, inv), len(inv.VMs))
	defer c.stop()
	start := time.Now()
	secs := benchSecondaries(tb, c, kinds, ports, false)
	c.waitAll(tb, secs, 5*time.Minute)
	r := ixfrBytes{perKind: map[secondarytest.Kind][]int{}}
	for _, x := range c.log.since(0) {
		if x.zone == demoZone && x.kind == "AXFR" {
			r.axfrBytes = x.bytes
		}
	}
	tb.Logf("%d VMs: %d zones on %d secondaries in %v (the AXFR of %s is %d bytes)", vms, len(c.zones()), len(secs), time.Since(start).Round(time.Millisecond), demoZone, r.axfrBytes)

	for n := range changes {
		mark := c.log.len()
		seen := make([]int, len(secs))
		for j, s := range secs {
			seen[j] = len(s.Transfers())
		}
		serial, _ := c.commit(tb, benchVM(inv, n))
		for _, s := range secs {
			if err := s.WaitSerial(demoZone, serial, time.Minute); err != nil {
				tb.Fatal(err)
			}
		}
		// cns logs a transfer once it is written; the secondary may
		// answer the new serial a moment before.
		deadline := time.Now().Add(10 * time.Second)
		var xs []xfrRec
		for {
			xs = xs[:0]
			for _, x := range c.log.since(mark) {
				if x.zone == demoZone && x.serial == serial {
					xs = append(xs, x)
				}
			}
			if len(xs) >= len(secs) || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		for _, x := range xs {
			if x.kind != "IXFR" {
				tb.Errorf("one-VM change on %d VMs went out as %s (%d bytes)", vms, x.kind, x.bytes)
				continue
			}
			r.cnsBytes = append(r.cnsBytes, x.bytes)
		}
		for j, s := range secs {
			for _, x := range s.Transfers()[seen[j]:] {
				if x.Zone == demoZone && x.Serial == serial {
					r.perKind[s.Kind()] = append(r.perKind[s.Kind()], x.Bytes)
				}
			}
		}
	}
	tb.Logf("%d VMs: one-VM change: cns sent IXFRs of %v bytes (median %d; the AXFR is %d)", vms, r.cnsBytes, r.median(), r.axfrBytes)
	for _, s := range secs {
		tb.Logf("%d VMs: %s counted %v bytes", vms, s.Kind(), r.perKind[s.Kind()])
		for _, l := range strings.Split(s.Log(), "\n") {
			if ll := strings.ToLower(l); strings.Contains(ll, "error") || strings.Contains(ll, "warning") || strings.Contains(ll, "fail") {
				tb.Logf("%s: %s", s.Kind(), l)
			}
		}
	}
	for _, s := range secs {
		s.Stop()
	}
	return r
}
