package main

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// chaosFault is one way the simulated data center misbehaves.
type chaosFault struct {
	name   string
	inject func(sim *sdcsim.Sim, rng *rand.Rand)
}

var chaosFaults = []chaosFault{
	{"vmapi 5xx", func(sim *sdcsim.Sim, rng *rand.Rand) {
		sim.SetFault(sdcsim.AnyRoute, sdcsim.Fault{Status: []int{500, 502, 503}[rng.IntN(3)]})
	}},
	{"vmapi 5xx on a fraction of requests", func(sim *sdcsim.Sim, rng *rand.Rand) {
		sim.SetFault(sdcsim.RouteGetVM, sdcsim.Fault{Status: 503, Fraction: 0.5})
		sim.SetFault(sdcsim.RouteListVMs, sdcsim.Fault{Status: 500, Fraction: 0.5})
	}},
	{"vmapi timeouts", func(sim *sdcsim.Sim, rng *rand.Rand) {
		sim.SetFault(sdcsim.RouteGetVM, sdcsim.Fault{Hang: true})
		sim.SetFault(sdcsim.RouteListVMs, sdcsim.Fault{Hang: true})
	}},
	{"vmapi slow", func(sim *sdcsim.Sim, rng *rand.Rand) {
		sim.SetFault(sdcsim.AnyRoute, sdcsim.Fault{Latency: time.Duration(200+rng.IntN(800)) * time.Millisecond})
	}},
	{"vmapi malformed JSON", func(sim *sdcsim.Sim, rng *rand.Rand) {
		sim.SetFault(sdcsim.RouteGetVM, sdcsim.Fault{Malformed: true})
		sim.SetFault(sdcsim.RouteListVMs, sdcsim.Fault{Malformed: true})
	}},
	{"changefeed closed", func(sim *sdcsim.Sim, rng *rand.Rand) { sim.DropFeeds(sdcsim.DropClose) }},
	{"changefeed reset", func(sim *sdcsim.Sim, rng *rand.Rand) { sim.DropFeeds(sdcsim.DropReset) }},
	{"changefeed half-open", func(sim *sdcsim.Sim, rng *rand.Rand) { sim.DropFeeds(sdcsim.DropHalfOpen) }},
	{"changefeed refused", func(sim *sdcsim.Sim, rng *rand.Rand) {
		sim.SetFeedFaults(sdcsim.FeedFaults{RefuseUpgrade: 503})
		sim.DropFeeds(sdcsim.DropClose)
	}},
	{"changefeed garbage frame", func(sim *sdcsim.Sim, rng *rand.Rand) {
		sim.SendFeedFrame([]string{`{"changeKind": garbage`, `[]`, `{"changedResourceId": 7}`, "\x00\xff"}[rng.IntN(4)])
	}},
	{"changefeed loses items", func(sim *sdcsim.Sim, rng *rand.Rand) {
		sim.SetFeedFaults(sdcsim.FeedFaults{DropItems: 1 << 20})
	}},
	{"ufds down", func(sim *sdcsim.Sim, rng *rand.Rand) { sim.SetLDAPDown(true) }},
	{"ufds busy", func(sim *sdcsim.Sim, rng *rand.Rand) {
		sim.SetFault(sdcsim.RouteLDAPSearch, sdcsim.Fault{LDAPResult: 51})
	}},
	{"cnapi and napi 500", func(sim *sdcsim.Sim, rng *rand.Rand) {
		sim.SetFault(sdcsim.RouteListServers, sdcsim.Fault{Status: 500})
		sim.SetFault(sdcsim.RouteListNetworks, sdcsim.Fault{Status: 500})
		sim.SetFault(sdcsim.RouteListNetworkPools, sdcsim.Fault{Malformed: true})
	}},
}

// clearChaos undoes every fault.
func clearChaos(sim *sdcsim.Sim) {
	sim.ClearFaults()
	sim.ReleaseHangs()
	sim.SetFeedFaults(sdcsim.FeedFaults{})
	sim.SetLDAPDown(false)
}

// Feed chaos: rounds of random faults (one to three at once: disconnects,
// 5xx, timeouts, malformed payloads, LDAP outages) during churn. A sampler
// queries names churn never touches the whole time: none may ever go
// missing. After each round cns must converge to the simulator's world
// within seconds. CNS_LONG=1 runs 40 rounds instead of 6.
func TestSDCChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: rounds of churn and faults against the simulator")
	}
	rounds := 6
	if longRun() {
		rounds = 40
	}
	sim := startSim(t, sdcsim.Options{})
	fc := testFeedConfig(t, sim)
	// Items lost while connected are only found by the periodic listing.
	fc.FullPollInterval = 3 * time.Second
	fc.FallbackPollInterval = 2 * time.Second
	c := startSDCCNS(t, filepath.Join(t.TempDir(), "cns.db"), fc)
	c.synced(20 * time.Second)

	rng := rand.New(rand.NewPCG(2026, 12))
	smp := startSampler(c)
	base := 0
	var worst time.Duration
	var took []time.Duration
	counts := map[string]int{}
	for r := range rounds {
		ch := startChurn(sim, base)
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		var names []string
		for range 1 + rng.IntN(3) {
			f := chaosFaults[rng.IntN(len(chaosFaults))]
			f.inject(sim, rng)
			names = append(names, f.name)
			counts[f.name]++
		}
		outage := time.Duration(300+rng.IntN(1700)) * time.Millisecond
		time.Sleep(outage) // churn through the outage
		clearChaos(sim)
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		ch.halt()
		base = ch.n
		d := c.converged(sim, 20*time.Second)
		took = append(took, d)
		worst = max(worst, d)
		t.Logf("round %d: %s for %v; converged %v after churn stopped", r, strings.Join(names, " + "), outage.Round(time.Millisecond), d.Round(time.Millisecond))
	}
	samples, lost := smp.halt()
	if len(lost) > 0 {
		t.Errorf("%d of %d samples lost a stable name during the chaos: %v", len(lost), samples, lost[:min(5, len(lost))])
	}
	slices.Sort(took)
	t.Logf("%d rounds, %d faults injected (%v); %d samples, %d lost; convergence after recovery median %v, max %v",
		rounds, sumCounts(counts), counts, samples, len(lost), took[len(took)/2].Round(time.Millisecond), worst.Round(time.Millisecond))
	if worst > 10*time.Second {
		t.Errorf("slowest convergence %v, want seconds", worst)
	}
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
