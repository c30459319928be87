package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/records"
	"github.com/tritondatacenter/cns/serve"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// demo runs the demo data center in-process (store, DNS server, updater
// with the inventory file) with the API on 127.0.0.1.
type demo struct {
	store  *db.DB
	dns    *serve.Server
	upd    *feeds.Updater
	base   string
	dnsTCP string
}

const (
	publicZone = "us-west-1.cns.example.com"
	cloudapiVM = "b752d788-c0e4-4307-8c56-353a4ea66c02"
	carolVM    = "e76f7f8b-fb63-4c58-adf4-5b275a0d5aa6"
	cloudapiIP = "198.51.100.20"
	aliceUUID  = "6c96670e-4204-4bc0-bd64-b4c576c09876"
)

func startDemo(t testing.TB) *demo {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	apex := db.Apex{MName: "cns.us-west-1.example.com.", RName: "hostmaster.example.com.", Refresh: 30, Retry: 60,
		Expire: 2592000, Minimum: 30, SOATTL: 30, NS: []string{"cns.us-west-1.example.com."}, NSTTL: 3600}
	zc := db.ZoneConfig{Forward: map[string]db.Apex{publicZone: apex, "us-west-1.int.example.com": apex}, Reverse: apex}
	rc := records.Config{UseAlias: true, UseLogin: true, Zones: []records.Zone{
		{Name: publicZone, Networks: []string{"c66bd90b-6e21-4a55-a4b5-18f6010c6b14"}},
		{Name: "us-west-1.int.example.com", Networks: []string{"*"}},
	}}
	srv, err := serve.New(serve.Config{Listen: []string{"127.0.0.1:0"}, Logger: log,
		Access: serve.Access{AllowTransfer: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}, store)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	u, err := feeds.NewUpdater(store, feeds.Options{Records: rc, Zones: zc, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := dc.LoadInventory("../testdata/inventory.json")
	if err != nil {
		t.Fatal(err)
	}
	u.SetInventory(inv, "inventory file loaded")
	for u.Pending() > 0 {
		if err := u.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := u.Flush(); err != nil { // the zone config alone, when no VM is pending
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	as := &Server{Store: store, DNS: srv, Updater: u, Version: "cns test", Log: log,
		Reload: func() error { return fmt.Errorf("config %s: my_name: required", "cfg.json") }}
	go as.Serve(ctx, ln)
	_, tcp := srv.Addrs()
	return &demo{store: store, dns: srv, upd: u, base: "http://" + ln.Addr().String(), dnsTCP: tcp[0]}
}

// normalize replaces what changes from run to run (serials, times, byte
// counts) with placeholders, so JSON can be compared with a golden file.
var (
	serialRE   = regexp.MustCompile(`\b1[7-9]\d{8}\b`)
	timeRE     = regexp.MustCompile(`"\d{4}-\d\d-\d\dT[0-9:.]+Z"`)
	lastVisit  = regexp.MustCompile(`"last_visit": \d+`)
	durationRE = regexp.MustCompile(`"(duration_ms|uptime_seconds)": [0-9.e+-]+`)
)

func normalize(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) == nil {
		b, _ = json.MarshalIndent(v, "", "  ")
	}
	b = serialRE.ReplaceAll(b, []byte("SERIAL"))
	b = timeRE.ReplaceAll(b, []byte(`"TIME"`))
	b = lastVisit.ReplaceAll(b, []byte(`"last_visit": 0`))
	b = durationRE.ReplaceAll(b, []byte(`"$1": 0`))
	return append(b, '\n')
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(path, got, 0o644)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./admin -update, then review)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s:\n%s", name, path, got)
	}
}

// The API contract: each endpoint's status and JSON, malformed requests
// included.
func TestAPIContract(t *testing.T) {
	d := startDemo(t)
	cases := []struct {
		name, method, path, body string
		status                   int
	}{
		{"ping", "GET", "/ping", "", 200},
		{"vm-listed", "GET", "/vm/" + cloudapiVM, "", 200},
		{"vm-unlisted", "GET", "/vm/" + carolVM, "", 200},
		{"vm-unknown", "GET", "/vm/00000000-0000-4000-8000-000000000000", "", 404},
		{"vm-bad-uuid", "GET", "/vm/not-a-uuid", "", 400},
		{"vms-alias", "GET", "/vms?q=WEB", "", 200},
		{"vms-owner-limit", "GET", "/vms?q=carol&limit=1", "", 200},
		{"vms-ip", "GET", "/vms?q=" + cloudapiIP, "", 200},
		{"vms-none", "GET", "/vms?q=nothing-matches", "", 200},
		{"vms-bad-limit", "GET", "/vms?limit=0", "", 400},
		{"zones", "GET", "/zones", "", 200},
		{"zone", "GET", "/zones/" + publicZone, "", 200},
		{"zone-unknown", "GET", "/zones/nope.example", "", 404},
		{"records-name", "GET", "/zones/" + publicZone + "/records?name=cloudapi", "", 200},
		{"records-page", "GET", "/zones/" + publicZone + "/records?limit=3", "", 200},
		{"records-bad-limit", "GET", "/zones/" + publicZone + "/records?limit=lots", "", 400},
		{"history", "GET", "/zones/" + publicZone + "/history", "", 200},
		{"history-bad-since", "GET", "/zones/" + publicZone + "/history?since=yesterday", "", 400},
		{"allowed-peers", "GET", "/allowed-peers", "", 200},
		{"peers-empty", "GET", "/peers", "", 200},
		{"peer-unknown", "GET", "/peer/10.9.9.9", "", 404},
		{"peer-bad-addr", "GET", "/peer/not-an-ip", "", 400},
		{"suffixes", "POST", "/suffixes-for-vm", `{"owner_uuid":"` + aliceUUID + `","networks":["c66bd90b-6e21-4a55-a4b5-18f6010c6b14","b3659b7a-cf1f-4d3f-a77f-899e12cb2706"]}`, 200},
		{"suffixes-bad-json", "POST", "/suffixes-for-vm", `{"owner_uuid":`, 400},
		{"suffixes-no-owner", "POST", "/suffixes-for-vm", `{"networks":[]}`, 400},
		{"suffixes-unknown-field", "POST", "/suffixes-for-vm", `{"owner_uuid":"x","nets":[]}`, 400},
		{"suffixes-bad-network", "POST", "/suffixes-for-vm", `{"owner_uuid":"x","networks":["public"]}`, 400},
		{"suffixes-unknown-owner", "POST", "/suffixes-for-vm", `{"owner_uuid":"00000000-0000-4000-8000-000000000000","networks":[]}`, 500},
		{"suffixes-huge", "POST", "/suffixes-for-vm", `{"owner_uuid":"` + strings.Repeat("x", maxBody) + `"}`, 400},
		{"feeds", "GET", "/feeds", "", 200},
		{"services", "GET", "/services", "", 200},
		{"services-pending", "GET", "/services?pending=true", "", 200},
		{"service", "GET", "/services/" + aliceUUID + "/web", "", 200},
		{"service-unknown", "GET", "/services/" + aliceUUID + "/nope", "", 404},
		{"wait-no-peers", "GET", "/wait?zone=" + publicZone + "&timeout=0.2", "", 200},
		{"wait-bad-zone", "GET", "/wait?zone=nope.example", "", 404},
		{"reload-fails", "POST", "/config/reload", "", 422},
		{"unknown-route", "GET", "/nothing/here", "", 404},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, d.base+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.name, resp.StatusCode, tc.status, body)
		}
		if resp.StatusCode >= 400 {
			var e Error
			if json.Unmarshal(body, &e) != nil || e.Code == "" || e.Message == "" {
				t.Errorf("%s: error body is not {code, message}: %s", tc.name, body)
			}
		}
		golden(t, "api-"+tc.name, normalize(body))
	}
	// The server still answers DNS after all of that.
	m := new(dns.Msg)
	m.SetQuestion("cloudapi."+publicZone+".", dns.TypeA)
	if r, _, err := (&dns.Client{Net: "tcp"}).Exchange(m, d.dnsTCP); err != nil || len(r.Answer) != 1 {
		t.Errorf("DNS after the API tests: %v %v", r, err)
	}
}

// A transfer makes a peer; the API lists it and DELETE forgets it.
func TestPeersLifecycle(t *testing.T) {
	d := startDemo(t)
	tr := new(dns.Transfer)
	m := new(dns.Msg)
	m.SetAxfr(publicZone + ".")
	ch, err := tr.In(m, d.dnsTCP)
	if err != nil {
		t.Fatal(err)
	}
	for range ch {
	}
	c := NewClient(d.base, "")
	ctx := context.Background()
	peers, err := c.Peers(ctx)
	if err != nil || len(peers) != 1 || peers[0].Address != "127.0.0.1" || peers[0].Serials[publicZone] == 0 {
		t.Fatalf("peers after an AXFR: %+v %v", peers, err)
	}
	p, err := c.Peer(ctx, "::ffff:127.0.0.1") // IPv4-mapped forms collapse
	if err != nil || p.Counters["axfr"] != 1 || p.Zones[publicZone].DriftSerials != 0 {
		t.Fatalf("peer: %+v %v", p, err)
	}
	if err := c.DeletePeer(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Peer(ctx, "127.0.0.1"); !IsNotFound(err) {
		t.Errorf("deleted peer: %v", err)
	}
	if err := c.DeletePeer(ctx, "127.0.0.1"); !IsNotFound(err) {
		t.Errorf("deleting twice: %v", err)
	}
}

// The backup is a consistent db file.
func TestBackup(t *testing.T) {
	d := startDemo(t)
	path := filepath.Join(t.TempDir(), "copy.db")
	f, _ := os.Create(path)
	n, err := NewClient(d.base, "").Backup(context.Background(), f)
	f.Close()
	if err != nil || n == 0 {
		t.Fatalf("backup: %d bytes, %v", n, err)
	}
	copyDB, err := db.Open(path, db.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer copyDB.Close()
	if probs, err := copyDB.Check(); err != nil || len(probs) > 0 {
		t.Errorf("backup check: %v %q", err, probs)
	}
	zones, _ := copyDB.Zones()
	if len(zones) != 5 {
		t.Errorf("backup holds %d zones, want 5", len(zones))
	}
}

// Metrics are Prometheus text with the zone serials and query counters.
func TestMetrics(t *testing.T) {
	d := startDemo(t)
	m := new(dns.Msg)
	m.SetQuestion("cloudapi."+publicZone+".", dns.TypeA)
	udp, _ := d.dns.Addrs()
	if _, _, err := new(dns.Client).Exchange(m, udp[0]); err != nil {
		t.Fatal(err)
	}
	text, err := NewClient(d.base, "").Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`cns_zone_serial{zone="us-west-1.cns.example.com"} 1`,
		`cns_dns_answers_total{proto="udp",qtype="A"} 1`,
		`cns_dns_rcodes_total{proto="udp",rcode="NOERROR"} 1`,
		`cns_commit_duration_seconds_count 1`,
		`cns_feed_healthy`,
		"# TYPE cns_transfers_total counter",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	for i, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if !strings.HasPrefix(line, "#") && !regexp.MustCompile(`^[a-z_]+(\{[^}]*\})? -?[0-9.e+]+$`).MatchString(line) {
			t.Errorf("line %d is not a sample: %q", i, line)
		}
	}
}

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
