package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/serve"
)

// The API's contract over the whole program, built as cns serve builds it:
// the demo data center's inventory file, the DNS server and the API. The
// golden answers are admin's (admin/testdata).

// apiDemo is cns built by newService, as cns serve builds it, from the
// test config with the demo data center's inventory file and the API on
// 127.0.0.1, once the feed's first commit has landed.
type apiDemo struct {
	dns    *serve.Server
	base   string
	dnsTCP string
	config string // the config file's path
}

const (
	publicZone = "us-west-1.cns.example.com"
	cloudapiVM = "b752d788-c0e4-4307-8c56-353a4ea66c02"
	carolVM    = "e76f7f8b-fb63-4c58-adf4-5b275a0d5aa6"
	cloudapiIP = "198.51.100.20"
	aliceUUID  = "6c96670e-4204-4bc0-bd64-b4c576c09876"
)

func startAPIDemo(t *testing.T, edits ...func(map[string]any)) *apiDemo {
	t.Helper()
	cfg := testConfig(t, t.TempDir(), "testdata/inventory.json", func(m map[string]any) {
		m["api_server"] = map[string]any{"listen": "127.0.0.1:0"}
		for _, edit := range edits {
			edit(m)
		}
	})
	r := startService(t, cfg, serviceTuning{})
	s := r.service
	waitFor(t, "the inventory's first commit and the feed's report", 10*time.Second, func() bool {
		return s.updater.Pending() == 0 && s.updater.LastCommit().VMs > 0 && len(s.updater.Feeds()) > 0
	})
	_, tcp := s.dns.Addrs()
	return &apiDemo{dns: s.dns, base: r.api, dnsTCP: tcp[0], config: cfg}
}

// normalize replaces what changes from run to run (serials, times, byte
// counts) with placeholders, so JSON can be compared with a golden file.
var (
	apiSerialRE   = regexp.MustCompile(`\b1[7-9]\d{8}\b`)
	apiTimeRE     = regexp.MustCompile(`"\d{4}-\d\d-\d\dT[0-9:.]+Z"`)
	apiLastVisit  = regexp.MustCompile(`"last_visit": \d+`)
	apiDurationRE = regexp.MustCompile(`"(duration_ms|oldest_change_ms|uptime_seconds)": [0-9.e+-]+`)
)

func normalizeAPI(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) == nil {
		b, _ = json.MarshalIndent(v, "", "  ")
	}
	b = apiSerialRE.ReplaceAll(b, []byte("SERIAL"))
	b = apiTimeRE.ReplaceAll(b, []byte(`"TIME"`))
	b = apiLastVisit.ReplaceAll(b, []byte(`"last_visit": 0`))
	b = apiDurationRE.ReplaceAll(b, []byte(`"$1": 0`))
	return append(b, '\n')
}

func goldenAPI(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("admin", "testdata", name+".golden")
	if *update {
		os.WriteFile(path, got, 0o644)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestAPIContract . -update, then review)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s:\n%s", name, path, got)
	}
}

// The API contract: each endpoint's status and JSON, malformed requests
// included.
func TestAPIContract(t *testing.T) {
	d := startAPIDemo(t)
	// A config edit that breaks it: POST /config/reload refuses it.
	var cfg map[string]any
	raw, err := os.ReadFile(d.config)
	if err == nil {
		err = json.Unmarshal(raw, &cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	delete(cfg, "my_name")
	raw, _ = json.Marshal(cfg)
	if err := os.WriteFile(d.config, raw, 0o644); err != nil {
		t.Fatal(err)
	}
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
		{"suffixes-huge", "POST", "/suffixes-for-vm", `{"owner_uuid":"` + strings.Repeat("x", 64<<10) + `"}`, 400},
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
			var e admin.Error
			if json.Unmarshal(body, &e) != nil || e.Code == "" || e.Message == "" {
				t.Errorf("%s: error body is not {code, message}: %s", tc.name, body)
			}
		}
		body = bytes.ReplaceAll(body, []byte(d.config), []byte("cfg.json")) // a new temporary path each run
		goldenAPI(t, "api-"+tc.name, normalizeAPI(body))
	}
	// The server still answers DNS after all of that.
	m := new(dns.Msg)
	m.SetQuestion("cloudapi."+publicZone+".", dns.TypeA)
	if r, _, err := (&dns.Client{Net: "tcp"}).Exchange(m, d.dnsTCP); err != nil || len(r.Answer) != 1 {
		t.Errorf("DNS after the API tests: %v %v", r, err)
	}
}

// A transfer makes a peer of a secondary the config names (on loopback,
// only those are); the API lists it and DELETE forgets it.
func TestPeersLifecycle(t *testing.T) {
	d := startAPIDemo(t, mirrorSecondary(t))
	c := admin.NewClient(d.base, "")
	ctx := context.Background()
	// The NOTIFYs of the first commit are answered before the test goes on.
	zones, err := c.Zones(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, z := range zones {
		if w, err := c.Wait(ctx, z.Name, 0, 10*time.Second); err != nil || !w.Done {
			t.Fatalf("the first commit of %s never reached the secondary: %+v %v", z.Name, w, err)
		}
	}
	tr := new(dns.Transfer)
	m := new(dns.Msg)
	m.SetAxfr(publicZone + ".")
	ch, err := tr.In(m, d.dnsTCP)
	if err != nil {
		t.Fatal(err)
	}
	for range ch {
	}
	// The server records the transfer once it has sent it, which may be
	// after the client has read the last message.
	deadline := time.After(10 * time.Second)
	for {
		changed := d.dns.PeersChanged()
		if ps := d.dns.Peers(); len(ps) == 1 && ps[0].Zones[publicZone] != nil && ps[0].Counters["axfr"] == 1 {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no peer recorded after an AXFR: %+v", d.dns.Peers())
		}
	}
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
	if _, err := c.Peer(ctx, "127.0.0.1"); !admin.IsNotFound(err) {
		t.Errorf("deleted peer: %v", err)
	}
	// Deleting a peer that is not there is done already: 200, as the
	// reference answers.
	if err := c.DeletePeer(ctx, "127.0.0.1"); err != nil {
		t.Errorf("deleting twice: %v", err)
	}
}

// The backup is a consistent db file.
func TestBackup(t *testing.T) {
	d := startAPIDemo(t)
	path := filepath.Join(t.TempDir(), "copy.db")
	f, _ := os.Create(path)
	n, err := admin.NewClient(d.base, "").Backup(context.Background(), f)
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
	d := startAPIDemo(t)
	m := new(dns.Msg)
	m.SetQuestion("cloudapi."+publicZone+".", dns.TypeA)
	udp, _ := d.dns.Addrs()
	if _, _, err := new(dns.Client).Exchange(m, udp[0]); err != nil {
		t.Fatal(err)
	}
	text, err := admin.NewClient(d.base, "").Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`cns_zone_serial{zone="us-west-1.cns.example.com"} 1`,
		`cns_dns_answers_total{proto="udp",qtype="A"} 1`,
		`cns_dns_rcodes_total{proto="udp",rcode="NOERROR"} 1`,
		`cns_commit_duration_seconds_count 1`,
		`cns_change_latency_seconds_count `,
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
