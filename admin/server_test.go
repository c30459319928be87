package admin

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin/admintest"
	"github.com/tritondatacenter/cns/admin/metrics"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
)

// The API's contract over a running program (golden answers, peers,
// backup, metrics) is tested at the root (inproc_api_test.go), where package
// main wires the DNS server in. Here the handlers run over a stored demo
// data center and a DNS server that serves what the store holds.

const (
	publicZone = "us-west-1.cns.example.com"
	cloudapiVM = "b752d788-c0e4-4307-8c56-353a4ea66c02"
	aliceUUID  = "6c96670e-4204-4bc0-bd64-b4c576c09876"
)

// storedDemo is the demo data center (testdata/cns.json) committed to a
// store by the updater.
type storedDemo struct {
	store *db.DB
	upd   *feeds.Updater
	inv   *dc.Inventory
}

func startStoredDemo(t testing.TB) *storedDemo {
	t.Helper()
	return startStoredDemoAt(t, nil)
}

// startStoredDemoAt is startStoredDemo with the updater on clock now (nil:
// time.Now).
func startStoredDemoAt(t testing.TB, now func() time.Time) *storedDemo {
	t.Helper()
	d := admintest.Store(t, admintest.Options{Now: now})
	return &storedDemo{store: d.Store, upd: d.Updater, inv: d.Inventory}
}

// server is an API server over the demo.
func (d *storedDemo) server(log *slog.Logger) *Server {
	return &Server{Store: d.store, DNS: storeDNS{d.store}, Updater: d.upd, Version: "cns test", Log: log}
}

// storeDNS is a DNS server that serves the store's zones and has seen no
// secondary.
type storeDNS struct{ store *db.DB }

func (d storeDNS) Listening() bool       { return true }
func (d storeDNS) Uptime() time.Duration { return time.Second }
func (d storeDNS) Zones() []ZoneSummary {
	zones, _ := d.store.Zones()
	var out []ZoneSummary
	for _, z := range zones {
		out = append(out, ZoneSummary{Name: z.Name, Serial: z.Serial})
	}
	return out
}
func (d storeDNS) ZoneSerial(zone string) (uint32, bool) {
	zi, ok, _ := d.store.Zone(zone)
	return zi.Serial, ok
}
func (storeDNS) PeerStatus() []Peer                             { return nil }
func (storeDNS) DeletePeer(netip.Addr) bool                     { return false }
func (storeDNS) PeersChanged() <-chan struct{}                  { return make(chan struct{}) }
func (storeDNS) ZonePeers(string) []netip.Addr                  { return nil }
func (storeDNS) AllowedPeers() []AllowedPeer                    { return nil }
func (storeDNS) Propagation(string, uint32) (Propagation, bool) { return Propagation{}, false }
func (storeDNS) PropagationChanged() <-chan struct{}            { return make(chan struct{}) }
func (storeDNS) Metrics() metrics.DNS                           { return metrics.DNS{} }

// Mutating endpoints take loopback callers and token holders only; reads
// need the read token when one is set.
func TestAuthorization(t *testing.T) {
	s := &Server{Token: "sekrit", ReadToken: "reader", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h := s.wrap(func(w http.ResponseWriter, r *http.Request) error { w.WriteHeader(204); return nil }, true)
	hr := s.wrap(func(w http.ResponseWriter, r *http.Request) error { w.WriteHeader(204); return nil }, false)
	cases := []struct {
		name     string
		handler  http.Handler
		remote   string
		bearer   string
		wantCode int
	}{
		{"mutate from loopback", h, "127.0.0.1:5000", "", 204},
		{"mutate from ::1", h, "[::1]:5000", "", 204},
		{"mutate remote without token", h, "192.0.2.7:5000", "", 403},
		{"mutate remote with read token", h, "192.0.2.7:5000", "reader", 403},
		{"mutate remote with token", h, "192.0.2.7:5000", "sekrit", 204},
		{"read remote without token", hr, "192.0.2.7:5000", "", 401},
		{"read remote with read token", hr, "192.0.2.7:5000", "reader", 204},
		{"read remote with token", hr, "192.0.2.7:5000", "sekrit", 204},
	}
	for _, tc := range cases {
		// An in-memory request: no traffic leaves the host.
		req := httptest.NewRequest("GET", "/x", nil)
		req.RemoteAddr = tc.remote
		if tc.bearer != "" {
			req.Header.Set("Authorization", "Bearer "+tc.bearer)
		}
		rec := httptest.NewRecorder()
		tc.handler.ServeHTTP(rec, req)
		if rec.Code != tc.wantCode {
			t.Errorf("%s: %d, want %d", tc.name, rec.Code, tc.wantCode)
		}
	}
	// A panicking handler is a 500, not a dead process.
	hp := s.wrap(func(w http.ResponseWriter, r *http.Request) error { panic("boom") }, false)
	req := httptest.NewRequest("GET", "/x", nil)
	req.RemoteAddr = "127.0.0.1:1"
	rec := httptest.NewRecorder()
	hp.ServeHTTP(rec, req)
	if rec.Code != 500 {
		t.Errorf("panic: %d", rec.Code)
	}
}

// pendingDNS is storeDNS with every serial still propagating, so GET /wait
// holds until its timeout; entered is closed once a wait has started.
type pendingDNS struct {
	storeDNS
	once    *sync.Once
	entered chan struct{}
}

func (d pendingDNS) Propagation(zone string, serial uint32) (Propagation, bool) {
	return Propagation{Zone: zone, Serial: serial, State: StatePending, Peers: []PeerPropagation{}}, true
}

func (d pendingDNS) PropagationChanged() <-chan struct{} {
	d.once.Do(func() { close(d.entered) })
	return make(chan struct{})
}

// Serve returns only once its shutdown, which waits for the requests in
// flight, is over: no goroutine of it outlives it.
func TestServeWaitsForItsShutdown(t *testing.T) {
	d := startStoredDemo(t)
	s := d.server(slog.New(slog.DiscardHandler))
	dns := pendingDNS{storeDNS: storeDNS{d.store}, once: new(sync.Once), entered: make(chan struct{})}
	s.DNS = dns
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	polled := make(chan error, 1)
	go func() {
		_, err := NewClient(ln.Addr().String(), "").Wait(context.Background(), publicZone, 0, time.Second)
		polled <- err
	}()
	<-dns.entered
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	// A goroutine that has signalled its end may still be returning: give
	// it a moment (as goleak does) before calling it a leak. The old Serve
	// left its shutdown goroutine blocked on the long poll for seconds.
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "admin.(*Server).Serve.func") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("a goroutine of Serve outlives it:\n%s", stacks)
			break
		}
	}
	if err := <-polled; err != nil {
		t.Errorf("the long poll in flight at shutdown: %v", err)
	}
}

// GET /vm/:uuid's last_visit is when a feed last saw the VM: a full
// listing that sees it unchanged moves it, and changes neither its
// records nor the zone's serial.
func TestLastVisitIsLastSeen(t *testing.T) {
	var mu sync.Mutex
	clock := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	d := startStoredDemoAt(t, now)
	h := d.server(slog.New(slog.DiscardHandler)).Handler()
	get := func() VM {
		t.Helper()
		req := httptest.NewRequest("GET", "/vm/"+cloudapiVM, nil)
		req.RemoteAddr = "127.0.0.1:1"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var vm VM
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &vm) != nil {
			t.Fatalf("GET /vm: %d %s", rec.Code, rec.Body)
		}
		return vm
	}
	first := get()
	zi, _, _ := d.store.Zone(publicZone)
	if first.LastVisit != clock.UnixMilli() {
		t.Errorf("last_visit %d, want %d", first.LastVisit, clock.UnixMilli())
	}
	mu.Lock()
	clock = clock.Add(90 * time.Second)
	mu.Unlock()
	d.upd.SetInventory(d.inv, "vmapi full listing")
	if err := d.upd.Flush(); err != nil {
		t.Fatal(err)
	}
	again := get()
	if again.LastVisit != now().UnixMilli() {
		t.Errorf("seen again: last_visit %d, want %d", again.LastVisit, now().UnixMilli())
	}
	zi2, _, _ := d.store.Zone(publicZone)
	if zi2.Serial != zi.Serial || !slices.Equal(again.Records, first.Records) || !slices.Equal(again.Names, first.Names) {
		t.Errorf("an unchanged VM seen again changed: serial %d -> %d, records %q -> %q", zi.Serial, zi2.Serial, first.Records, again.Records)
	}
}

// GET /services and GET /services/:owner/:name name what they list: the
// owner's login, each VM's alias (members, departures, decisions), and
// a member down before cns ever saw it up is marked with when cns first
// saw it down.
func TestServicesSpeakInNames(t *testing.T) {
	const web0, web2 = "fb576cd8-2cf6-4182-b2a9-c6ba9c73834e", "f47889c3-2578-42e6-a1e6-7d0ef46e7fd6"
	d := startStoredDemo(t)
	// web0 marks itself down: it leaves web (a departure, a decision).
	for _, vm := range d.inv.VMs {
		if vm.UUID == web0 {
			vm.CustomerMetadata = map[string]any{"triton.cns.status": "down"}
			d.upd.SetVM(&vm, "test")
		}
	}
	if err := d.upd.Flush(); err != nil {
		t.Fatal(err)
	}
	h := d.server(slog.New(slog.DiscardHandler)).Handler()
	get := func(path string, v any) string {
		t.Helper()
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = "127.0.0.1:1"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), v) != nil {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	var list []Service
	get("/services", &list)
	var one Service
	raw := get("/services/"+aliceUUID+"/web", &one)
	i := slices.IndexFunc(list, func(v Service) bool { return v.Owner == aliceUUID && v.Service == "web" })
	if i < 0 {
		t.Fatalf("no web of alice in %+v", list)
	}
	for what, v := range map[string]Service{"GET /services": list[i], "GET /services/:owner/:name": one} {
		if v.Login != "alice" {
			t.Errorf("%s: owner login %q, want alice", what, v.Login)
		}
		aliases := map[string]string{}
		for _, m := range v.Members {
			aliases[m.VM] = m.Alias
			switch {
			case m.VM == web2 && (m.FirstSeenDown.IsZero() || !m.FirstSeenDown.Equal(m.DownSince)):
				t.Errorf("%s: web2, down since cns first saw it: %+v", what, m)
			case m.VM != web2 && !m.FirstSeenDown.IsZero():
				t.Errorf("%s: %s was seen going down, or is up: %+v", what, m.Alias, m)
			}
		}
		if aliases[web0] != "web0" || aliases[web2] != "web2" || len(aliases) != 3 {
			t.Errorf("%s: member aliases %v", what, aliases)
		}
		if len(v.Departures) != 1 || v.Departures[0].Alias != "web0" {
			t.Errorf("%s: departures %+v, want web0's", what, v.Departures)
		}
		if len(v.History) == 0 || slices.ContainsFunc(v.History, func(d Decision) bool { return d.Alias != "web0" }) {
			t.Errorf("%s: decisions %+v, all web0's", what, v.History)
		}
	}
	if !strings.Contains(raw, `"first_seen_down":`) || !strings.Contains(raw, `"login":"alice"`) {
		t.Errorf("the JSON lacks the new fields:\n%s", raw)
	}
}
