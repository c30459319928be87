package sdc_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// These tests run a whole feed against the simulator and look at what it
// asks the services (every request the feed's HTTP client sends) and
// what it hands its sink.

// recordingSink keeps the last state of everything a feed hands it.
type recordingSink struct {
	mu       sync.Mutex
	listed   chan struct{}
	once     sync.Once
	vms      map[string]dc.VM
	servers  []dc.Server
	networks []dc.Network
	pools    []dc.NetworkPool
}

func newRecordingSink() *recordingSink {
	return &recordingSink{listed: make(chan struct{}), vms: map[string]dc.VM{}}
}

func (s *recordingSink) SetInventory(inv *dc.Inventory, _ string) {
	s.mu.Lock()
	clear(s.vms)
	for _, vm := range append(*inv.Listing.(*dc.VMList), inv.VMs...) {
		s.vms[strings.ToLower(vm.UUID)] = vm
	}
	s.servers, s.networks, s.pools = inv.Servers, inv.Networks, inv.NetworkPools
	s.mu.Unlock()
	s.once.Do(func() { close(s.listed) })
}

func (s *recordingSink) SetVM(vm *dc.VM, _ string) {
	s.mu.Lock()
	s.vms[strings.ToLower(vm.UUID)] = *vm
	s.mu.Unlock()
}

func (s *recordingSink) RemoveVM(id, _ string) {
	s.mu.Lock()
	delete(s.vms, id)
	s.mu.Unlock()
}

func (*recordingSink) SetUser(dc.User, string) {}

func (*recordingSink) BeginListing() dc.Listing { return &dc.VMList{} }

func (s *recordingSink) SetServers(servers []dc.Server, _ string) {
	s.mu.Lock()
	s.servers = servers
	s.mu.Unlock()
}

func (s *recordingSink) SetNetworks(nets []dc.Network, pools []dc.NetworkPool, _ string) {
	s.mu.Lock()
	s.networks, s.pools = nets, pools
	s.mu.Unlock()
}

func (*recordingSink) ReportFeed(string, error) {}

func (s *recordingSink) vm(id string) (dc.VM, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, ok := s.vms[id]
	return vm, ok
}

func (s *recordingSink) server(id string) (dc.Server, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, srv := range s.servers {
		if strings.EqualFold(srv.UUID, id) {
			return srv, true
		}
	}
	return dc.Server{}, false
}

func (s *recordingSink) networkUUIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range s.networks {
		out = append(out, strings.ToLower(n.UUID))
	}
	slices.Sort(out)
	return out
}

// requestLog records the URL of every request a feed sends over HTTP.
type requestLog struct {
	mu   sync.Mutex
	urls []*url.URL
}

func (l *requestLog) client() *http.Client {
	return &http.Client{Transport: hookTransport{after: func(r *http.Request) {
		l.mu.Lock()
		l.urls = append(l.urls, r.URL)
		l.mu.Unlock()
	}}}
}

// since returns the requests after the first n whose path matches.
func (l *requestLog) since(n int, path func(string) bool) []*url.URL {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*url.URL
	for _, u := range l.urls[min(n, len(l.urls)):] {
		if path(u.Path) {
			out = append(out, u)
		}
	}
	return out
}

func (l *requestLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.urls)
}

func pathIs(p string) func(string) bool { return func(s string) bool { return s == p } }

func pathHas(prefix string) func(string) bool {
	return func(s string) bool { return strings.HasPrefix(s, prefix) }
}

// quietConfig is a feed configuration whose periodic polls do not come
// during a test: what the feed asks is what changes asked for.
func quietConfig(ep sdc.Endpoints, log *requestLog) sdc.Config {
	return sdc.Config{Endpoints: ep, HTTPClient: log.client(),
		FullPollInterval: time.Hour, FallbackPollInterval: time.Hour, ReaperInterval: time.Hour,
		CNAPIInterval: time.Hour, NAPIInterval: time.Hour, UFDSInterval: time.Hour,
		RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond}
}

// runFeed runs a feed until the test ends and waits for its first listing.
func runFeed(t *testing.T, cfg sdc.Config) (*sdc.Feed, *recordingSink) {
	f, sink, _ := startFeed(t, cfg)
	return f, sink
}

// startFeed is runFeed that also returns a function stopping the feed
// earlier (it waits for Run to return).
func startFeed(t testing.TB, cfg sdc.Config) (*sdc.Feed, *recordingSink, func()) {
	t.Helper()
	sink := newRecordingSink()
	f, err := sdc.NewFeed(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	select {
	case <-sink.listed:
	case <-time.After(2 * time.Minute):
		t.Fatal("no full listing")
	}
	return f, sink, stop
}

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Issue 25 item 2: VM state changes ask CNAPI about their CNs only, by
// uuid and without sysinfo; the listing of every CN with its sysinfo
// stays on its slow timer. (The feed used to list every CN with sysinfo
// after any state change, at most every 2 s: this test then saw those
// listings and no uuids query.)
func TestFeedStateChangesAskOnlyTheirCNs(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 200, VMsPerCN: 10, Seed: 3})
	s := startSim(t, inv, sdcsim.Options{})
	log := &requestLog{}
	_, sink := runFeed(t, quietConfig(simEndpoints(t, s), log))
	mark := log.len()

	changed := []string{strings.ToLower(inv.Servers[1].UUID), strings.ToLower(inv.Servers[4].UUID)}
	for _, cn := range changed {
		if _, err := s.ModifyVMsOnServer(cn, func(vm *dc.VM) { vm.State = "stopped" }); err != nil {
			t.Fatal(err)
		}
	}
	var asked []string
	waitUntil(t, "CNAPI asked about both CNs", func() bool {
		asked = nil
		for _, u := range log.since(mark, pathIs("/servers")) {
			asked = append(asked, strings.Split(u.Query().Get("uuids"), ",")...)
		}
		slices.Sort(asked)
		return slices.Equal(slices.Compact(asked), changed)
	})
	for _, u := range log.since(mark, pathHas("/servers")) {
		q := u.Query()
		if strings.Contains(q.Get("extras"), "sysinfo") || !q.Has("uuids") || u.Path != "/servers" {
			t.Errorf("a state change asked CNAPI %s", u)
		}
	}
	// The CNs asked about keep the sysinfo of the full listing.
	for _, cn := range changed {
		if srv, ok := sink.server(cn); !ok || srv.AdminNICTag() != "admin" || srv.Sysinfo == nil {
			t.Errorf("CN %s after the refresh: %+v", cn, srv)
		}
	}
	waitUntil(t, "the stopped VMs applied", func() bool {
		for _, vm := range inv.VMs {
			if strings.EqualFold(vm.ServerUUID, changed[0]) {
				got, _ := sink.vm(strings.ToLower(vm.UUID))
				return got.State == "stopped"
			}
		}
		return false
	})
}

// Issue 25 item 2: NAPI is asked for the networks the VMs' NICs name, one
// by one or by the listing when many, never every network of the data
// center on a timer; a VM on a network not seen yet gets it fetched before
// it is applied. (The feed used to list every network and pool each
// minute and at every full listing: this test then saw /networks listed
// and all 120 networks handed to the sink.)
func TestFeedNetworksOnDemand(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 24, VMsPerOwner: 12, Networks: 120, Seed: 5})
	named := map[string]bool{}
	for _, vm := range inv.VMs {
		for _, nic := range vm.NICs {
			named[nic.NetworkUUID] = true
		}
	}
	if len(named) >= len(inv.Networks)/4 || len(named) > 32 {
		t.Fatalf("the generated DC names %d of %d networks: the test wants few", len(named), len(inv.Networks))
	}
	s := startSim(t, inv, sdcsim.Options{})
	log := &requestLog{}
	_, sink := runFeed(t, quietConfig(simEndpoints(t, s), log))

	if got := log.since(0, pathIs("/networks")); len(got) != 0 {
		t.Errorf("the feed listed every network: %v", got)
	}
	fetched := log.since(0, pathHas("/networks/"))
	if len(fetched) != len(named) {
		t.Errorf("%d network fetches for %d networks named by VMs", len(fetched), len(named))
	}
	want := slices.Sorted(func(yield func(string) bool) {
		for id := range named {
			if !yield(id) {
				return
			}
		}
	})
	if got := sink.networkUUIDs(); !slices.Equal(got, want) {
		t.Errorf("networks handed to the sink: %v, want the %d the VMs name", got, len(want))
	}
	if n := len(log.since(0, pathIs("/network_pools"))); n != 1 {
		t.Errorf("%d pool listings, want 1", n)
	}

	// A VM on a new network: that network is fetched, once.
	mark := log.len()
	const newNet = "0b2f6a4e-5d71-4c6a-a5b0-2bd1c4e5a7d1"
	if err := s.PutNetwork(dc.Network{UUID: newNet, Name: "late", Subnet: "192.168.250.0/24", NICTag: "sdc_overlay",
		OwnerUUIDs: []string{inv.Users[0].UUID}}); err != nil {
		t.Fatal(err)
	}
	vm := inv.VMs[0]
	vm.UUID = "b6c1f3a2-4c1e-4f6e-9a53-3c8a3bd0e1f7"
	vm.OwnerUUID = inv.Users[0].UUID
	vm.NICs = []dc.NIC{{Interface: "net0", MAC: "90:b8:d0:2c:6e:11", IP: "192.168.250.5", NICTag: "sdc_overlay/7", NetworkUUID: newNet}}
	if err := s.CreateVM(vm); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the new VM applied", func() bool { _, ok := sink.vm(vm.UUID); return ok })
	if !slices.Contains(sink.networkUUIDs(), newNet) {
		t.Error("the new VM's network was not handed to the sink")
	}
	got := log.since(mark, pathHas("/networks"))
	if len(got) != 1 || got[0].Path != "/networks/"+newNet {
		t.Errorf("NAPI requests for the new VM: %v, want GET /networks/%s", got, newNet)
	}
}

// Issue 25 item 3: a NIC VMAPI lists without network_uuid (older VMs) is
// looked up in NAPI by MAC, once, so that the VM lands in its network's
// zones. (The feed used to leave the NIC without a network, in "*" zones
// only: this test then found no network_uuid and no /nics request.)
func TestFeedLegacyNICFoundInNAPI(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 6, Seed: 7})
	legacy := &inv.VMs[2]
	legacy.NICs[0].NetworkUUID = ""
	id := strings.ToLower(legacy.UUID)
	s := startSim(t, inv, sdcsim.Options{})
	log := &requestLog{}
	_, sink := runFeed(t, quietConfig(simEndpoints(t, s), log))

	vm, _ := sink.vm(id)
	if len(vm.NICs) == 0 || vm.NICs[0].NetworkUUID != sdcsim.ExternalNetwork {
		t.Fatalf("the legacy NIC after the listing: %+v, want network %s", vm.NICs, sdcsim.ExternalNetwork)
	}
	mac := strings.ReplaceAll(legacy.NICs[0].MAC, ":", "")
	if got := log.since(0, pathHas("/nics/")); len(got) != 1 || got[0].Path != "/nics/"+mac {
		t.Errorf("NIC look-ups: %v, want one GET /nics/%s", got, mac)
	}
	// A change to the VM uses the cached answer.
	mark := log.len()
	if err := s.SetAlias(legacy.UUID, "renamed"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the rename applied", func() bool { v, _ := sink.vm(id); return v.AliasString() == "renamed" })
	if vm, _ := sink.vm(id); vm.NICs[0].NetworkUUID != sdcsim.ExternalNetwork {
		t.Errorf("the legacy NIC after a change: %+v", vm.NICs[0])
	}
	if got := log.since(mark, pathHas("/nics/")); len(got) != 0 {
		t.Errorf("NIC looked up again: %v", got)
	}
}

// Issue 25 item 3: a CN CNAPI reports unknown with a null last_heartbeat
// (the answering CNAPI restarted after the CN died) is timed from when the
// feed first saw it so, and is down once the CN-down rule's hour has
// passed. (dc.ServerState used to call it unknown forever, so a fresh cns
// kept it up: this test then failed at the hour.)
func TestFeedNullHeartbeatTimedByStatus(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 20, VMsPerCN: 10, Seed: 9})
	dead := &inv.Servers[1]
	dead.Status, dead.LastHeartbeat = "unknown", nil
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var clock sync.Mutex
	now := t0
	s := startSim(t, inv, sdcsim.Options{})
	log := &requestLog{}
	cfg := quietConfig(simEndpoints(t, s), log)
	cfg.CNAPIInterval = 20 * time.Millisecond
	cfg.Now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	_, sink := runFeed(t, cfg)

	srv, ok := sink.server(dead.UUID)
	if !ok || !srv.NotRunningSince.Equal(t0) {
		t.Fatalf("dead CN as handed to the sink: %+v, want not running since %v", srv, t0)
	}
	if st := dc.ServerState(&srv, t0.Add(59*time.Minute)); st != dc.CNUp {
		t.Errorf("59 minutes after it was first seen unknown: %v, want up (the rule's hour)", st)
	}
	// Later polls keep the first sighting, and the hour ends.
	clock.Lock()
	now = t0.Add(30 * time.Minute)
	clock.Unlock()
	mark := log.len()
	waitUntil(t, "two more CNAPI polls", func() bool { return len(log.since(mark, pathIs("/servers"))) >= 2 })
	srv, _ = sink.server(dead.UUID)
	if !srv.NotRunningSince.Equal(t0) {
		t.Errorf("not running since %v after a later poll, want %v", srv.NotRunningSince, t0)
	}
	if st := dc.ServerState(&srv, t0.Add(61*time.Minute)); st != dc.CNDown {
		t.Errorf("61 minutes after it was first seen unknown: %v, want down", st)
	}
	// It comes back: the clock is reset.
	if err := s.ModifyServer(dead.UUID, func(srv *dc.Server) { srv.Status = "running" }); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the CN running again", func() bool {
		srv, _ := sink.server(dead.UUID)
		return srv.Status == "running" && srv.NotRunningSince.IsZero()
	})
}

// Issue 25 item 3: a resourceObject whose last_modified is older than
// the state applied (a migration to a CN whose clock is behind) is
// fetched, and VMAPI's answer applied. (The feed used to drop it as
// stale: this test then kept the VM on its old CN.)
func TestFeedOlderObjectIsFetched(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 20, VMsPerCN: 10, Seed: 13})
	s := startSim(t, inv, sdcsim.Options{ResourceObject: true})
	log := &requestLog{}
	_, sink := runFeed(t, quietConfig(simEndpoints(t, s), log))

	vm := inv.VMs[0]
	id := strings.ToLower(vm.UUID)
	// A change first, so that the feed has applied an object of this VM.
	if err := s.SetAlias(vm.UUID, "before-migration"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the alias applied", func() bool { v, _ := sink.vm(id); return v.AliasString() == "before-migration" })
	before, _ := sink.vm(id)
	at, err := time.Parse(time.RFC3339Nano, before.LastModified)
	if err != nil {
		t.Fatal(err)
	}
	target := inv.Servers[1].UUID
	if strings.EqualFold(vm.ServerUUID, target) {
		target = inv.Servers[0].UUID
	}
	mark := log.len()
	if err := s.ModifyVM(vm.UUID, func(v *dc.VM) {
		v.ServerUUID = target
		v.LastModified = at.Add(-time.Minute).UTC().Format("2006-01-02T15:04:05.000Z")
	}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the migrated VM on its new CN", func() bool {
		v, _ := sink.vm(id)
		return strings.EqualFold(v.ServerUUID, target)
	})
	if got := log.since(mark, pathIs("/vms/"+vm.UUID)); len(got) == 0 {
		t.Error("the older-looking object was applied without asking VMAPI")
	}
}

// DelayHistogram times each change the changefeed announced from the
// item's arrival to the VM reaching the sink: one change, one
// observation, no longer than the change took end to end.
func TestFeedDelayHistogram(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 20, VMsPerCN: 10, Seed: 13})
	s := startSim(t, inv, sdcsim.Options{ResourceObject: true})
	f, sink := runFeed(t, quietConfig(simEndpoints(t, s), &requestLog{}))
	if h := f.DelayHistogram(); h.Count != 0 {
		t.Fatalf("%d delays observed before any change", h.Count)
	}
	vm := inv.VMs[0]
	start := time.Now()
	if err := s.SetAlias(vm.UUID, "renamed"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the change's delay observed", func() bool { return f.DelayHistogram().Count == 1 })
	elapsed := time.Since(start)
	if v, _ := sink.vm(strings.ToLower(vm.UUID)); v.AliasString() != "renamed" {
		t.Errorf("delay observed, but the sink has alias %q", v.AliasString())
	}
	if got := time.Duration(f.DelayHistogram().Sum * float64(time.Second)); got <= 0 || got > elapsed {
		t.Errorf("delay %v, outside (0, %v]", got, elapsed)
	}
}

// A changefeed that reconnects may have missed changes while it was down
// (the publisher keeps nothing for a listener that is gone): the feed
// lists every VM again after each bootstrap, at once, not at its
// periodic listing (an hour here).
func TestFeedRelistsAfterReconnect(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 20, VMsPerCN: 10, Seed: 17})
	s := startSim(t, inv, sdcsim.Options{})
	log := &requestLog{}
	_, sink := runFeed(t, quietConfig(simEndpoints(t, s), log))
	vm := inv.VMs[0]
	id := strings.ToLower(vm.UUID)

	// The change item is lost on the way, as if published while the
	// feed was not listening.
	s.SetFeedFaults(sdcsim.FeedFaults{DropItems: 1})
	if err := s.SetAlias(vm.UUID, "changed-while-away"); err != nil {
		t.Fatal(err)
	}
	s.FlushFeed()
	if n := s.PendingFeedItems(); n != 0 {
		t.Fatalf("%d change items still queued in the publisher", n)
	}
	s.SetFeedFaults(sdcsim.FeedFaults{})
	mark := log.len()
	if n := s.DropFeeds(sdcsim.DropClose); n != 1 {
		t.Fatalf("%d changefeed connections dropped, want 1", n)
	}
	waitUntil(t, "the lost change applied after the changefeed reconnected", func() bool {
		v, _ := sink.vm(id)
		return v.AliasString() == "changed-while-away"
	})
	if got := log.since(mark, pathIs("/vms")); len(got) == 0 {
		t.Error("the change was applied without a full listing")
	}
}
