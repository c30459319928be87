package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// The SDC end-to-end tests run cns in-process (db, updater, SDC feed, DNS
// server) against the SDC simulator, over real sockets on 127.0.0.1, and
// look at the result the way a resolver does: DNS queries.

// sdcCNS is one in-process cns fed by the SDC feed, built by the wiring
// cns serve uses (startService) from the testdata config pointed at a
// simulator.
type sdcCNS struct {
	*running
	t    testing.TB
	feed *sdc.Feed
}

// sdcSetup is how a test points cns at a simulator: the config keys the
// simulator prints and the feed's timings (its Endpoints are ignored: they
// come from the keys, as in production).
type sdcSetup struct {
	sdc.Config
	keys map[string]json.RawMessage
}

// startSim starts the simulator on the testdata data center; the test fails
// if anything cns sent would have made a real service exit.
func startSim(t testing.TB, opts sdcsim.Options) *sdcsim.Sim {
	t.Helper()
	sim, err := sdcsim.New(loadDefaultDC(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sim.Close(); err != nil {
			t.Error(err)
		}
	})
	return sim
}

// testFeedConfig points a feed at sim with intervals short enough for
// tests. The full listing is rare: changes must arrive through the
// changefeed, CNAPI, NAPI and UFDS paths, not a periodic re-list.
func testFeedConfig(t testing.TB, sim *sdcsim.Sim) sdcSetup {
	t.Helper()
	keys := map[string]json.RawMessage{}
	for k, v := range sim.Config() {
		keys[k], _ = json.Marshal(v)
	}
	return sdcSetup{keys: keys, Config: sdc.Config{
		FullPollInterval:     time.Hour,
		FallbackPollInterval: time.Hour,
		ReaperInterval:       time.Hour,
		CNAPIInterval:        100 * time.Millisecond,
		NAPIInterval:         100 * time.Millisecond,
		UFDSInterval:         50 * time.Millisecond,
		PingInterval:         100 * time.Millisecond,
		PongTimeout:          300 * time.Millisecond,
		RequestTimeout:       time.Second,
		RetryMin:             20 * time.Millisecond,
		RetryMax:             300 * time.Millisecond,
	}}
}

// startSDCCNS opens (or reopens) the db at dbPath and runs cns on it
// with the SDC feed set up by fc.
func startSDCCNS(t testing.TB, dbPath string, fc sdcSetup) *sdcCNS {
	return startSDCCNSWith(t, dbPath, fc, feeds.Options{})
}

// startSDCCNSWith is startSDCCNS with the updater's clock or batch window
// (the non-zero fields of opts).
func startSDCCNSWith(t testing.TB, dbPath string, fc sdcSetup, opts feeds.Options) *sdcCNS {
	t.Helper()
	cfg := testConfig(t, filepath.Dir(dbPath), "", func(c map[string]any) {
		c["db_path"] = dbPath
		delete(c, "inventory_file")
		for k, v := range fc.keys {
			c[k] = v
		}
	})
	r := startService(t, cfg, serviceTuning{
		SDC: func(c *sdc.Config) {
			ep, log := c.Endpoints, c.Logger
			*c = fc.Config
			c.Endpoints, c.Logger = ep, log
		},
		Updater: func(o *feeds.Options) {
			if opts.Now != nil {
				o.Now = opts.Now
			}
			if opts.BatchWindow != 0 {
				o.BatchWindow = opts.BatchWindow
			}
		},
	})
	return &sdcCNS{running: r, t: t, feed: r.feed.(*sdc.Feed)}
}

// synced waits until the feed applied a full listing and the updater
// committed everything.
func (c *sdcCNS) synced(timeout time.Duration) {
	c.t.Helper()
	waitFor(c.t, "the first full listing to be committed", timeout, func() bool {
		return c.feed.Status().FullSyncs > 0 && c.updater.Pending() == 0 && c.feed.Status().Pending == 0
	})
}

// answer asks cns over UDP and returns the rcode and the answer records
// as text.
func (c *sdcCNS) answer(name string, qtype uint16) (int, []string) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	cl := &dns.Client{Timeout: time.Second}
	r, _, err := cl.Exchange(m, c.addr)
	if err != nil {
		return -1, nil
	}
	var out []string
	for _, rr := range r.Answer {
		out = append(out, strings.ReplaceAll(rr.String(), "\t", " "))
	}
	sort.Strings(out)
	return r.Rcode, out
}

// answerText describes an answer for a failure message.
func answerText(rcode int, ans []string) string {
	if rcode < 0 {
		return "no answer within 1 s"
	}
	return fmt.Sprintf("%s %q", dns.RcodeToString[rcode], ans)
}

// hasA reports whether name answers an A record with address ip (or, ip
// empty, any address).
func (c *sdcCNS) hasA(name, ip string) bool {
	rcode, ans := c.answer(name, dns.TypeA)
	return answersA(rcode, ans, ip)
}

// answersA reports whether an answer (answer's rcode and records) holds
// an A record with address ip (or, ip empty, any address).
func answersA(rcode int, ans []string, ip string) bool {
	if rcode != dns.RcodeSuccess {
		return false
	}
	for _, a := range ans {
		if strings.HasSuffix(a, " A "+ip) || (ip == "" && strings.Contains(a, " A ")) {
			return true
		}
	}
	return false
}

func (c *sdcCNS) nxdomain(name string) bool {
	rcode, _ := c.answer(name, dns.TypeA)
	return rcode == dns.RcodeNameError
}

// dumpZones renders every stored zone, apex excluded, as sorted lines.
func dumpZones(t testing.TB, store *db.DB) map[string][]string {
	t.Helper()
	zones, err := store.Zones()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, z := range zones {
		var lines []string
		err := store.ScanZone(z.Name, func(owner []byte, rrs db.RRs) error {
			name := db.WireToString(owner)
			list, err := rrs.ToRR(name)
			if err != nil {
				return err
			}
			for _, rr := range list {
				lines = append(lines, strings.ReplaceAll(rr.String(), "\t", " "))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(lines)
		if len(lines) > 0 {
			out[z.Name] = lines
		}
	}
	return out
}

// simZonesByFreshUpdater computes, with a fresh store and updater (see
// freshUpdaterZones: the same code, so it checks the pipeline, not the
// rules), what cns must publish for the simulator's current world: its VMs (the destroyed ones too),
// the compute nodes (their CMON names), owners, networks and pools.
func simZonesByFreshUpdater(t testing.TB, sim *sdcsim.Sim) map[string][]string {
	t.Helper()
	inv := sim.Inventory()
	return freshUpdaterZones(t, "testdata/cns.json", &inv)
}

// converged waits until cns publishes exactly the simulator's truth.
func (c *sdcCNS) converged(sim *sdcsim.Sim, timeout time.Duration) time.Duration {
	c.t.Helper()
	var want, got map[string][]string
	start := time.Now()
	for {
		want = simZonesByFreshUpdater(c.t, sim)
		if c.updater.Pending() == 0 && c.feed.Status().Pending == 0 {
			got = dumpZones(c.t, c.store)
			if maps.EqualFunc(got, want, slices.Equal[[]string]) {
				return time.Since(start)
			}
		}
		if time.Since(start) > timeout {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for z := range want {
		for _, l := range want[z] {
			if !slices.Contains(got[z], l) {
				c.t.Errorf("missing in %s: %s", z, l)
			}
		}
		for _, l := range got[z] {
			if !slices.Contains(want[z], l) {
				c.t.Errorf("extra in %s: %s", z, l)
			}
		}
	}
	c.t.Fatalf("cns did not converge to the simulator's world within %v (feed %+v, updater pending %d, feeds %+v)",
		timeout, c.feed.Status(), c.updater.Pending(), c.updater.Feeds())
	return 0
}

func loadDefaultDC(t testing.TB) dc.Inventory {
	t.Helper()
	inv, err := dc.LoadInventory("testdata/inventory.json")
	if err != nil {
		t.Fatal(err)
	}
	return *inv
}

// IDs of the default data center (testdata/inventory.json).
const (
	dcAlice    = "6c96670e-4204-4bc0-bd64-b4c576c09876"
	dcBob      = "0a565296-4e53-477d-b118-b89e25e1af62"
	dcCN01     = "f3c0a6aa-07e9-433a-add6-bdc0c11cd0b9"
	dcWeb0     = "fb576cd8-2cf6-4182-b2a9-c6ba9c73834e"
	dcExternal = "5840750e-9b5f-413b-9413-4c392c07ca35"
	dcExt2     = "8ead9fff-d292-4cea-a202-f16bb6228d2e"
	dcPool     = "c66bd90b-6e21-4a55-a4b5-18f6010c6b14"
	cnsZone    = "us-west-1.cns.example.com"
	intZone    = "us-west-1.int.example.com"
)

// The first full listing publishes exactly what the inventory file feed
// publishes for the same data center, plus the compute nodes' cmon names.
func TestSDCInitialSync(t *testing.T) {
	sim := startSim(t, sdcsim.Options{})
	c := startSDCCNS(t, filepath.Join(t.TempDir(), "cns.db"), testFeedConfig(t, sim))
	c.synced(20 * time.Second)
	c.converged(sim, 5*time.Second)

	want, _, inv := computedDC(t)
	for k, records := range want {
		_, got := c.answer(k.owner, k.qtype)
		if !slices.Equal(got, records) {
			t.Errorf("%s %s:\n got %q\nwant %q", k.owner, dns.TypeToString[k.qtype], got, records)
		}
	}
	for _, s := range inv.Servers {
		for _, z := range []string{cnsZone, intZone} {
			name := s.UUID + ".cmon." + z
			if _, got := c.answer(name, dns.TypeCNAME); len(got) != 1 || !strings.HasSuffix(got[0], "CNAME cmon."+z+".") {
				t.Errorf("CN cmon name %s: %q", name, got)
			}
		}
	}
	for _, f := range c.updater.Feeds() {
		if !f.Healthy {
			t.Errorf("feed %s unhealthy: %s", f.Name, f.Reason)
		}
	}
}

func newTestVM(uuid, owner, server, alias, ip, network string) dc.VM {
	vlan := 0
	return dc.VM{UUID: uuid, Alias: &alias, OwnerUUID: owner, ServerUUID: server, State: "running", Brand: "joyent",
		NICs: []dc.NIC{{Interface: "net0", MAC: "90:b8:d0:aa:bb:01", VLANID: &vlan, NICTag: "external",
			IP: ip, IPs: []string{ip + "/25"}, NetworkUUID: network, Primary: true}},
		Tags: map[string]any{}, CustomerMetadata: map[string]any{}}
}

// Every kind of change in the data center reaches DNS, through the path
// the SDC APIs give it (changefeed, CNAPI poll, NAPI poll, UFDS
// changelog), each timed.
func TestSDCChangesReachDNS(t *testing.T) {
	sim := startSim(t, sdcsim.Options{ResourceObject: true})
	fc := testFeedConfig(t, sim)
	fc.keys["api_server"] = json.RawMessage(`{"listen": "127.0.0.1:0"}`) // the metrics at the end
	c := startSDCCNS(t, filepath.Join(t.TempDir(), "cns.db"), fc)
	c.synced(20 * time.Second)

	const vm = "5e1f0000-0000-4000-8000-000000000001"
	inst := func(alias, login, zone string) string { return alias + ".inst." + login + "." + zone }
	hour := func(d time.Duration) *string { s := time.Now().Add(d).UTC().Format(time.RFC3339Nano); return &s }
	steps := []struct {
		name   string
		change func() error
		done   func() bool
	}{
		{"VM created", func() error {
			return sim.CreateVM(newTestVM(vm, dcAlice, dcCN01, "fresh", "198.51.100.99", dcExternal))
		}, func() bool { return c.hasA(inst("fresh", "alice", cnsZone), "198.51.100.99") }},
		{"tag added (services)", func() error { return sim.SetTag(vm, "triton.cns.services", "api:8080") },
			func() bool { return c.hasA("api.svc.alice."+cnsZone, "198.51.100.99") }},
		{"metadata added (acme challenge)", func() error { return sim.SetMetadata(vm, "triton.cns.acme-challenge", "tok3n") },
			func() bool {
				_, ans := c.answer("_acme-challenge."+inst("fresh", "alice", cnsZone), dns.TypeTXT)
				return len(ans) == 1 && strings.Contains(ans[0], "tok3n")
			}},
		{"alias changed", func() error { return sim.SetAlias(vm, "renamed") },
			func() bool {
				return c.hasA(inst("renamed", "alice", cnsZone), "198.51.100.99") && c.nxdomain(inst("fresh", "alice", cnsZone))
			}},
		{"IP changed", func() error {
			v, _ := sim.VM(vm)
			v.NICs[0].IP, v.NICs[0].IPs = "198.51.100.98", []string{"198.51.100.98/25"}
			return sim.SetNICs(vm, v.NICs)
		}, func() bool {
			return c.hasA(inst("renamed", "alice", cnsZone), "198.51.100.98") && !c.hasA(inst("renamed", "alice", cnsZone), "198.51.100.99")
		}},
		{"VM stopped", func() error { return sim.StopVM(vm) },
			func() bool {
				// Out of the service (a "verifying:" TXT stays, as in CNS).
				return c.hasA(inst("renamed", "alice", cnsZone), "198.51.100.98") && !c.hasA("api.svc.alice."+cnsZone, "")
			}},
		{"VM started", func() error { return sim.StartVM(vm) },
			func() bool { return c.hasA("api.svc.alice."+cnsZone, "198.51.100.98") }},
		{"tag disables the VM", func() error { return sim.SetTag(vm, "triton.cns.disable", true) },
			func() bool { return c.nxdomain(inst("renamed", "alice", cnsZone)) }},
		{"tag removed", func() error { return sim.DeleteTag(vm, "triton.cns.disable") },
			func() bool { return c.hasA(inst("renamed", "alice", cnsZone), "198.51.100.98") }},
		{"VM destroyed", func() error { return sim.DestroyVM(vm) },
			func() bool {
				return c.nxdomain(inst("renamed", "alice", cnsZone)) && c.nxdomain("api.svc.alice."+cnsZone)
			}},
		{"user opts out", func() error { return sim.SetUserFlag(dcBob, "triton_cns_enabled", "false") },
			func() bool { return c.nxdomain(inst("nginx-1", "bob", cnsZone)) }},
		{"user opts in", func() error { return sim.SetUserFlag(dcBob, "triton_cns_enabled", "true") },
			func() bool { return c.hasA(inst("nginx-1", "bob", cnsZone), "198.51.100.40") }},
		{"login renamed", func() error { return sim.SetUserAttrs(dcBob, map[string]string{"login": "robert"}) },
			func() bool {
				return c.hasA(inst("nginx-1", "robert", cnsZone), "198.51.100.40") && c.nxdomain(inst("nginx-1", "bob", cnsZone))
			}},
		{"CN down", func() error { return sim.ServerDown(dcCN01) },
			func() bool {
				return !c.hasA("web.svc.alice."+cnsZone, "198.51.100.30") && c.hasA(inst("web0", "alice", cnsZone), "198.51.100.30")
			}},
		{"CN up", func() error {
			return sim.ModifyServer(dcCN01, func(s *dc.Server) { s.Status, s.LastHeartbeat = "running", hour(0) })
		}, func() bool { return c.hasA("web.svc.alice."+cnsZone, "198.51.100.30") }},
		{"CN rebooted: its instances leave services", func() error {
			return sim.ModifyServer(dcCN01, func(s *dc.Server) { s.LastBoot = *hour(0) })
		}, func() bool {
			return !c.hasA("web.svc.alice."+cnsZone, "198.51.100.30") && c.hasA("web.svc.alice."+cnsZone, "198.51.100.31")
		}},
		{"CN settled after its reboot", func() error {
			return sim.ModifyServer(dcCN01, func(s *dc.Server) { s.LastBoot = *hour(-3 * time.Minute) })
		}, func() bool { return c.hasA("web.svc.alice."+cnsZone, "198.51.100.30") }},
		{"pool loses a network", func() error {
			return sim.PutNetworkPool(dc.NetworkPool{UUID: dcPool, Name: "external-pool", Networks: []string{dcExternal}})
		}, func() bool {
			return c.nxdomain(inst("mail", "alice", cnsZone)) && c.hasA(inst("mail", "alice", intZone), "198.51.100.150")
		}},
		{"pool regains it", func() error {
			return sim.PutNetworkPool(dc.NetworkPool{UUID: dcPool, Name: "external-pool", Networks: []string{dcExternal, dcExt2}})
		}, func() bool { return c.hasA(inst("mail", "alice", cnsZone), "198.51.100.150") }},
		{"CN added: its cmon name", func() error {
			hb := hour(0)
			return sim.PutServer(dc.Server{UUID: "c0ffee00-0000-4000-8000-000000000001", Hostname: "cn09", Setup: true,
				Status: "running", LastHeartbeat: hb, LastBoot: "2025-01-01T00:00:00.000Z"})
		}, func() bool {
			_, ans := c.answer("c0ffee00-0000-4000-8000-000000000001.cmon."+cnsZone, dns.TypeCNAME)
			return len(ans) == 1
		}},
		{"CN removed", func() error { return sim.RemoveServer("c0ffee00-0000-4000-8000-000000000001") },
			func() bool { return c.nxdomain("c0ffee00-0000-4000-8000-000000000001.cmon." + cnsZone) }},
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.change(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		waitFor(t, s.name, 10*time.Second, s.done)
		t.Logf("%-45s answered in %v", s.name, time.Since(start).Round(time.Millisecond))
	}
	if n := c.feed.Status().FullSyncs; n != 1 {
		t.Errorf("%d full listings: the changes should have come without re-listing", n)
	}
	c.converged(sim, 5*time.Second)
	// The changes were timed: changefeed item → updater, and updater →
	// served, one observation per VM change.
	text, err := admin.NewClient(c.api, "").Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cns_changefeed_delay_seconds", "cns_change_latency_seconds"} {
		var count float64
		if _, err := fmt.Sscanf(text[strings.Index(text, "\n"+name+"_count ")+1:], name+"_count %g", &count); err != nil || count < 5 {
			t.Errorf("%s_count %v (%v): want at least one per VM change", name, count, err)
		}
	}
}

// churner changes the data center continuously: creates VMs, renames,
// stops, starts and destroys them. It never touches the VMs of the
// initial inventory, which tests sample to prove that no zone is emptied.
type churner struct {
	sim  *sdcsim.Sim
	n    int
	live []string
	stop chan struct{}
	done chan struct{}
}

func startChurn(sim *sdcsim.Sim, base int) *churner {
	ch := &churner{sim: sim, n: base, stop: make(chan struct{}), done: make(chan struct{})}
	go ch.run()
	return ch
}

func (ch *churner) run() {
	defer close(ch.done)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ch.stop:
			return
		case <-t.C:
		}
		switch {
		case len(ch.live) < 5 || i%4 == 0:
			ch.n++
			id := fmt.Sprintf("c4a50000-0000-4000-8000-%012x", ch.n)
			ip := fmt.Sprintf("198.51.100.%d", 64+ch.n%60)
			if ch.sim.CreateVM(newTestVM(id, dcAlice, dcCN01, fmt.Sprintf("churn%d", ch.n), ip, dcExternal)) == nil {
				ch.live = append(ch.live, id)
			}
		case i%4 == 1:
			ch.sim.SetAlias(ch.live[i%len(ch.live)], fmt.Sprintf("churn-renamed%d", i))
		case i%4 == 2:
			id := ch.live[i%len(ch.live)]
			if v, _ := ch.sim.VM(id); v.State == "running" {
				ch.sim.StopVM(id)
			} else {
				ch.sim.StartVM(id)
			}
		default:
			k := i % len(ch.live)
			ch.sim.DestroyVM(ch.live[k])
			ch.live = slices.Delete(ch.live, k, k+1)
		}
	}
}

func (ch *churner) halt() {
	close(ch.stop)
	<-ch.done
}

// stableNames are names of the initial data center that churn never
// touches, with their address.
var stableNames = map[string]string{
	"web0.inst.alice." + cnsZone:       "198.51.100.30",
	"web1.inst.alice." + cnsZone:       "198.51.100.31",
	"mail.inst.alice." + cnsZone:       "198.51.100.150",
	"nginx-1.inst.bob." + cnsZone:      "198.51.100.40",
	"ubuntu-dev.inst.bob." + cnsZone:   "198.51.100.160",
	"web0.inst.alice." + intZone:       "192.168.128.10",
	"worker.svc.alice." + intZone:      "192.168.128.30",
	"cloudapi." + cnsZone:              "198.51.100.20",
	"db.svc.alice." + intZone:          "192.168.128.20",
	"nginx.svc.bob." + cnsZone:         "198.51.100.40",
	"web.svc.alice." + cnsZone:         "198.51.100.31",
	"batch0.inst.alice." + cnsZone:     "198.51.100.140",
	"redis-1.inst.bob." + intZone:      "192.168.128.20",
	"legacy-app.inst.alice." + intZone: "192.168.128.60",
	"db0.inst.alice." + intZone:        "192.168.128.20",
	"f47889c3-2578-42e6-a1e6-7d0ef46e7fd6.inst.6c96670e-4204-4bc0-bd64-b4c576c09876." + cnsZone: "198.51.100.32",
}

// sampler queries the stable names continuously and records every
// answer that lost one: the proof that an outage never empties a zone.
type sampler struct {
	c       *sdcCNS
	mu      sync.Mutex
	samples int
	lost    []string
	stop    chan struct{}
	done    chan struct{}
}

func startSampler(c *sdcCNS) *sampler {
	s := &sampler{c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			for name, ip := range stableNames {
				select {
				case <-s.stop:
					return
				default:
				}
				rcode, ans := c.answer(name, dns.TypeA)
				s.mu.Lock()
				s.samples++
				if !answersA(rcode, ans, ip) {
					s.lost = append(s.lost, fmt.Sprintf("%s: %s", name, answerText(rcode, ans)))
				}
				s.mu.Unlock()
			}
			for _, z := range []string{cnsZone, intZone} {
				if rcode, ans := c.answer(z, dns.TypeSOA); rcode != dns.RcodeSuccess || len(ans) != 1 {
					s.mu.Lock()
					s.lost = append(s.lost, fmt.Sprintf("%s SOA: %s", z, answerText(rcode, ans)))
					s.mu.Unlock()
				}
			}
			time.Sleep(time.Millisecond) // pace: leave CPU to cns on small machines
		}
	}()
	return s
}

func (s *sampler) halt() (int, []string) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.lost
}

// Faults of every service during churn: cns keeps answering every name it
// had, reports the feed degraded, and converges to the simulator's world
// once the fault is gone.
func TestSDCFaultsDuringChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: churn and faults against the simulator")
	}
	sim := startSim(t, sdcsim.Options{})
	fc := testFeedConfig(t, sim)
	// Items lost while connected are only found by the periodic listing.
	fc.FullPollInterval = 3 * time.Second
	fc.FallbackPollInterval = 2 * time.Second
	c := startSDCCNS(t, filepath.Join(t.TempDir(), "cns.db"), fc)
	c.synced(20 * time.Second)
	for name, ip := range stableNames {
		if !c.hasA(name, ip) {
			t.Fatalf("stable name %s does not answer %s before any fault", name, ip)
		}
	}

	degraded := func(feed string) func() bool {
		return func() bool {
			for _, f := range c.updater.Feeds() {
				if f.Name == feed && !f.Healthy {
					return true
				}
			}
			return false
		}
	}
	base := 0
	for _, tc := range []struct {
		name    string
		health  string
		inject  func()
		recover func()
	}{
		{"vmapi 503 and changefeed refused", sdc.HealthVMAPI, func() {
			sim.SetFault(sdcsim.AnyRoute, sdcsim.Fault{Status: 503})
			sim.SetFeedFaults(sdcsim.FeedFaults{RefuseUpgrade: 503})
			sim.DropFeeds(sdcsim.DropClose)
		}, func() { sim.ClearFaults(); sim.SetFeedFaults(sdcsim.FeedFaults{}) }},
		{"vmapi timeouts", sdc.HealthVMAPI, func() {
			sim.SetFault(sdcsim.RouteGetVM, sdcsim.Fault{Hang: true})
			sim.SetFault(sdcsim.RouteListVMs, sdcsim.Fault{Hang: true})
			sim.DropFeeds(sdcsim.DropReset)
		}, func() { sim.ClearFaults(); sim.ReleaseHangs() }},
		{"vmapi malformed JSON", sdc.HealthVMAPI, func() {
			sim.SetFault(sdcsim.RouteGetVM, sdcsim.Fault{Malformed: true})
			sim.SetFault(sdcsim.RouteListVMs, sdcsim.Fault{Malformed: true})
			sim.SendFeedFrame(`{"changeKind": garbage`)
		}, func() { sim.ClearFaults() }},
		{"changefeed half-open", sdc.HealthChangefeed, func() {
			sim.DropFeeds(sdcsim.DropHalfOpen)
		}, func() {}},
		{"changefeed loses items while connected", sdc.HealthChangefeed, func() {
			sim.SetFeedFaults(sdcsim.FeedFaults{DropItems: 1 << 20})
			sim.DropFeeds(sdcsim.DropReset)
		}, func() { sim.SetFeedFaults(sdcsim.FeedFaults{}) }},
		{"ufds down", sdc.HealthUFDS, func() {
			sim.SetLDAPDown(true)
			sim.SetUserFlag(dcBob, "approved_for_provisioning", "true") // a changelog entry to read
			// A new account's first VM: its owner cannot be looked up yet.
			sim.AddUser(dc.User{UUID: "ee000000-0000-4000-8000-000000000001", Login: "erin", TritonCNSEnabled: "true", ApprovedForProvisioning: "true"})
			sim.CreateVM(newTestVM("ee000000-0000-4000-8000-0000000000e1", "ee000000-0000-4000-8000-000000000001", dcCN01, "erin0", "198.51.100.124", dcExternal))
		}, func() { sim.SetLDAPDown(false) }},
		{"cnapi and napi 500", sdc.HealthCNAPI, func() {
			sim.SetFault(sdcsim.RouteListServers, sdcsim.Fault{Status: 500})
			sim.SetFault(sdcsim.RouteListNetworks, sdcsim.Fault{Status: 500})
			sim.SetFault(sdcsim.RouteListNetworkPools, sdcsim.Fault{Malformed: true})
		}, func() { sim.ClearFaults() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			smp := startSampler(c)
			ch := startChurn(sim, base)
			time.Sleep(200 * time.Millisecond)
			tc.inject()
			waitFor(t, tc.health+" reported degraded", 10*time.Second, degraded(tc.health))
			time.Sleep(time.Second) // churn through the outage
			tc.recover()
			time.Sleep(300 * time.Millisecond)
			ch.halt()
			base = ch.n
			took := c.converged(sim, 20*time.Second)
			samples, lost := smp.halt()
			if len(lost) > 0 {
				t.Errorf("%d of %d samples lost a stable name during the fault: %v", len(lost), samples, lost[:min(5, len(lost))])
			}
			t.Logf("%d samples, none lost; converged %v after the fault cleared", samples, took.Round(time.Millisecond))
		})
	}
}

// A restart of cns during churn converges, and loses no change: neither
// those made while it was down nor those in flight when it stopped.
func TestSDCRestartDuringChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: restarts during churn against the simulator")
	}
	sim := startSim(t, sdcsim.Options{DuplicateFanout: true})
	dbPath := filepath.Join(t.TempDir(), "cns.db")
	c := startSDCCNS(t, dbPath, testFeedConfig(t, sim))
	c.synced(20 * time.Second)
	ch := startChurn(sim, 0)
	for range 3 {
		time.Sleep(400 * time.Millisecond)
		c.stop() // in the middle of churn: pending changes are dropped with the process
		time.Sleep(300 * time.Millisecond)
		c = startSDCCNS(t, dbPath, testFeedConfig(t, sim))
		// The restarted cns serves what it stored before any feed answers.
		if !c.hasA("web0.inst.alice."+cnsZone, "198.51.100.30") {
			t.Error("restarted cns does not serve the stored zone at once")
		}
	}
	time.Sleep(400 * time.Millisecond)
	ch.halt()
	took := c.converged(sim, 20*time.Second)
	t.Logf("%d VMs created by churn, 3 restarts; converged %v after churn stopped", ch.n, took.Round(time.Millisecond))
}

// `cns sim` prints the config keys on its first line; `cns serve` pointed
// at them serves the simulated data center, and edits of the inventory
// file reach DNS: the real binaries, end to end.
func TestSimCommandDrivesServe(t *testing.T) {
	dir := t.TempDir()
	invPath := filepath.Join(dir, "dc.json")
	inv := loadDefaultDC(t)
	writeInventory(t, invPath, &inv)

	sim := exec.Command(cnsBin(t), "sim", "--inventory", invPath)
	out, err := sim.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Process.Kill(); sim.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, out)
	}()
	var keys map[string]json.RawMessage
	select {
	case line := <-lines:
		if err := json.Unmarshal([]byte(line), &keys); err != nil {
			t.Fatalf("first line of cns sim is not a JSON object: %q", line)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("cns sim printed nothing")
	}
	for _, k := range []string{"vmapi_opts", "cnapi_opts", "napi_opts", "ufds_opts", "changefeed_opts"} {
		if keys[k] == nil {
			t.Fatalf("cns sim config lacks %s: %v", k, keys)
		}
	}

	cfg := testConfig(t, dir, "", func(c map[string]any) {
		delete(c, "inventory_file")
		for k, v := range keys {
			c[k] = v
		}
	})
	p := startCNS(t, cfg)
	p.waitLog(20*time.Second, func(l logLine) bool { return l.str("msg") == "full listing applied" })
	waitFor(t, "the listing to be served", 10*time.Second, func() bool {
		return p.hasA("web0.inst.alice."+cnsZone, "198.51.100.30")
	})

	// Edit the file as an operator would: rename web0, opt carol in.
	for i := range inv.VMs {
		if inv.VMs[i].UUID == dcWeb0 {
			alias := "web0-edited"
			inv.VMs[i].Alias = &alias
		}
	}
	for i := range inv.Users {
		if inv.Users[i].Login == "carol" {
			inv.Users[i].TritonCNSEnabled = "true"
		}
	}
	start := time.Now()
	writeInventory(t, invPath, &inv)
	waitFor(t, "the edited alias", 10*time.Second, func() bool {
		return p.hasA("web0-edited.inst.alice."+cnsZone, "198.51.100.30")
	})
	alias := time.Since(start)
	waitFor(t, "carol's VM", 10*time.Second, func() bool {
		return p.hasA("carol-web.inst.carol."+cnsZone, "198.51.100.50")
	})
	// The simulator polls the file every 200 ms; cns reads the UFDS
	// changelog every 2 s by default.
	t.Logf("file edit answered by cns serve: alias (changefeed) in %v, user flag (UFDS changelog) in %v",
		alias.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// hasA asks the running binary for an A record over UDP.
func (p *proc) hasA(name, ip string) bool {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	r, _, err := (&dns.Client{Timeout: time.Second}).Exchange(m, p.addr)
	if err != nil || r.Rcode != dns.RcodeSuccess {
		return false
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && a.A.String() == ip {
			return true
		}
	}
	return false
}

// A CN reboot shows first as its VMs changing state on the changefeed;
// cns then looks at the CNs at once (not at the next 60 s poll), so the
// VMs coming back on the freshly booted CN stay out of services until it
// has settled, and their instance names stay.
func TestSDCRebootBurst(t *testing.T) {
	sim := startSim(t, sdcsim.Options{})
	fc := testFeedConfig(t, sim)
	fc.CNAPIInterval = time.Hour
	c := startSDCCNS(t, filepath.Join(t.TempDir(), "cns.db"), fc)
	c.synced(20 * time.Second)
	if !c.hasA("web.svc.alice."+cnsZone, "198.51.100.30") {
		t.Fatal("web0 not in its service before the reboot")
	}

	start := time.Now()
	now := time.Now().UTC().Format(time.RFC3339Nano)
	sim.ModifyServer(dcCN01, func(s *dc.Server) { s.LastBoot = now })
	setState := func(state string) {
		if _, err := sim.ModifyVMsOnServer(dcCN01, func(vm *dc.VM) { vm.State = state }); err != nil {
			t.Fatal(err)
		}
	}
	setState("stopped")
	setState("running")
	waitFor(t, "web0 out of its service", 10*time.Second, func() bool {
		return !c.hasA("web.svc.alice."+cnsZone, "198.51.100.30")
	})
	t.Logf("reboot burst: CN down and its VMs out of services in %v", time.Since(start).Round(time.Millisecond))
	// Once every change is applied, the running VMs are still out: the CN
	// is down, not just the VMs stopped for a moment.
	waitFor(t, "the burst to be applied", 10*time.Second, func() bool {
		v, _ := sim.VM(dcWeb0)
		return v.State == "running" && c.feed.Status().Pending == 0 && c.updater.Pending() == 0
	})
	if c.hasA("web.svc.alice."+cnsZone, "198.51.100.30") {
		t.Fatal("web0 is back in its service on a CN booted moments ago")
	}
	if !c.hasA("web0.inst.alice."+cnsZone, "198.51.100.30") || !c.hasA("web.svc.alice."+cnsZone, "198.51.100.31") {
		t.Error("the reboot removed more than the rebooted CN's VMs from services")
	}
}
