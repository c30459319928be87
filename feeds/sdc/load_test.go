package sdc_test

import (
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// BenchmarkAPILoad measures the requests a feed with the production timings
// puts on each SDC API of a simulated data center of 500 CNs and 5,000
// networks: during the first listing, at idle, and during a burst of
// 1,000 VM state changes at once and of 1,000 over a minute; median of 3
// fresh runs, once whatever b.N. It takes a few minutes (BENCHMARKS.md,
// "Load on the SDC APIs"):
//
//	go test ./feeds/sdc -run '^$' -bench APILoad -benchtime 1x -v
//
// CNS_API_LOAD_IDLE sets the idle window (default 65s, one CNAPI period).
func BenchmarkAPILoad(b *testing.B) {
	t := b
	idle := 65 * time.Second
	if v := os.Getenv("CNS_API_LOAD_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		idle = d
	}
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 5000, VMsPerCN: 10, Networks: 4998, Seed: 25})
	t.Logf("data center: %d VMs, %d CNs, %d networks, %d users", len(inv.VMs), len(inv.Servers), len(inv.Networks), len(inv.Users))
	var runs []map[string][4]float64
	var bursts []time.Duration
	for range 3 {
		r, took := loadRun(t, inv, idle)
		runs = append(runs, r)
		bursts = append(bursts, took)
	}
	keys := map[string]bool{}
	for _, r := range runs {
		for k := range r {
			keys[k] = true
		}
	}
	med := func(k string, i int) float64 {
		v := []float64{runs[0][k][i], runs[1][k][i], runs[2][k][i]}
		slices.Sort(v)
		return v[1]
	}
	slices.Sort(bursts)
	t.Logf("burst applied and settled in %v (median)", bursts[1].Round(100*time.Millisecond))
	t.Logf("| API request | first listing (requests) | idle (requests/min) | 1,000 changes at once (requests) | 1,000 changes over 60 s (requests) |")
	t.Logf("|---|---|---|---|---|")
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Logf("| %s | %g | %.1f | %g | %g |", k, med(k, 0), med(k, 1), med(k, 2), med(k, 3))
	}
}

// loadRun is one measurement on a fresh simulator and feed: requests per
// kind during the first listing, per minute at idle, and during the burst.
func loadRun(t testing.TB, inv *dc.Inventory, idle time.Duration) (map[string][4]float64, time.Duration) {
	s, err := sdcsim.New(*inv, sdcsim.Options{DeliveryInterval: 2 * time.Second, DuplicateFanout: true,
		ResourceObject: true, PlainLDAPInConfig: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	log := &requestLog{}
	cfg := sdc.Config{Endpoints: simEndpoints(t, s), HTTPClient: log.client()} // production timings
	f, sink, stop := startFeed(t, cfg)
	defer stop()
	waitUntil(t, "the first listing's changes", func() bool { return f.Status().Pending == 0 })

	out := map[string][4]float64{}
	add := func(i int, counts map[string]int, scale float64) {
		for k, n := range counts {
			v := out[k]
			v[i] = float64(n) * scale
			out[k] = v
		}
	}
	ldap := func() int { return s.Requests(sdcsim.RouteLDAPSearch) }
	mark, ldapMark := log.len(), ldap()
	first := classify(log.since(0, func(string) bool { return true }), len(inv.Servers))
	first["UFDS search"] = ldapMark
	add(0, first, 1)

	time.Sleep(idle)
	idleCounts := classify(log.since(mark, func(string) bool { return true }), len(inv.Servers))
	idleCounts["UFDS search"] = ldap() - ldapMark
	add(1, idleCounts, float64(time.Minute)/float64(idle))

	// The burst: 1,000 VMs, chosen at random over every CN, stop at once;
	// then 1,000 others start, one every 60 ms (a minute of steady churn).
	rng := rand.New(rand.NewPCG(7, 7))
	perm := rng.Perm(len(inv.VMs))
	var took time.Duration
	for col, spec := range []struct {
		from  int
		state string
		every time.Duration
	}{{0, "stopped", 0}, {1000, "stopped", 60 * time.Millisecond}} {
		ids := make([]string, 0, 1000)
		for _, i := range perm[spec.from : spec.from+1000] {
			ids = append(ids, inv.VMs[i].UUID)
		}
		mark, ldapMark = log.len(), ldap()
		start := time.Now()
		for _, id := range ids {
			if err := s.SetVMState(id, spec.state); err != nil {
				t.Fatal(err)
			}
			time.Sleep(spec.every)
		}
		waitApplied(t, f, sink, ids, spec.state)
		time.Sleep(3 * time.Second) // the CN look-ups the last changes asked for
		if col == 0 {
			took = time.Since(start)
		}
		counts := classify(log.since(mark, func(string) bool { return true }), len(inv.Servers))
		counts["UFDS search"] = ldap() - ldapMark
		add(2+col, counts, 1)
	}
	return out, took
}

// waitApplied waits until the sink holds every VM of ids in state and the
// feed has nothing pending.
func waitApplied(t testing.TB, f *sdc.Feed, sink *recordingSink, ids []string, state string) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		done := f.Status().Pending == 0
		for _, id := range ids {
			if vm, _ := sink.vm(strings.ToLower(id)); vm.State != state {
				done = false
				break
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the changes were not applied within 2 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// classify names each request by API and route, with CNAPI's listings
// told apart by what they ask for, and counts the CN objects asked for
// (a listing of every CN asks for all cns of them).
func classify(urls []*url.URL, cns int) map[string]int {
	out := map[string]int{}
	for _, u := range urls {
		q := u.Query()
		var k string
		switch p := u.Path; {
		case p == "/vms":
			k = "VMAPI ListVms (page)"
		case strings.HasPrefix(p, "/vms/"):
			k = "VMAPI GetVm"
		case strings.HasPrefix(p, "/changefeeds"):
			k = "VMAPI GET " + p
		case p == "/servers" && strings.Contains(q.Get("extras"), "sysinfo"):
			k = "CNAPI ListServers, every CN with sysinfo"
			out["(CNAPI server objects asked for)"] += cns
		case p == "/servers" && q.Has("uuids"):
			k = "CNAPI ListServers by uuid, no sysinfo"
			out["(CNAPI server objects asked for)"] += len(strings.Split(q.Get("uuids"), ","))
		case p == "/servers":
			k = "CNAPI ListServers, every CN, no sysinfo"
			out["(CNAPI server objects asked for)"] += cns
		case p == "/networks":
			k = "NAPI ListNetworks (page)"
		case strings.HasPrefix(p, "/networks/"):
			k = "NAPI GetNetwork"
		case p == "/network_pools":
			k = "NAPI ListNetworkPools"
		case strings.HasPrefix(p, "/nics/"):
			k = "NAPI GetNic"
		default:
			k = "other " + p
		}
		out[k]++
	}
	return out
}
