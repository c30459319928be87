package smf

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin/config"
)

const templatePath = "sapi_manifests/cns/template"

// minimalMetadata is what SAPI always gives the cns service's instance:
// the sdc application's metadata that the template reads, and the
// instance's own UUIDs (SAPI's generateZoneConfig adds INSTANCE_UUID,
// ZONE_UUID and SERVER_UUID).
func minimalMetadata() map[string]any {
	return map[string]any{
		"datacenter_name":   "us-west-1",
		"dns_domain":        "example.com",
		"ufds_ldap_root_dn": "cn=root",
		"ufds_ldap_root_pw": "s3cr3t",
		"INSTANCE_UUID":     "e31ac854-f9fa-4561-b6fd-b56a9980633b",
		"ZONE_UUID":         "e31ac854-f9fa-4561-b6fd-b56a9980633b",
		"SERVER_UUID":       "44454c4c-5000-1047-8051-b7c04f4b4e31",
	}
}

// fullMetadata sets every key the template reads, as cnsadm config or
// sapiadm would store it (objects as objects, lists as lists): each to
// its Example in the key table, except where the metadata must say it
// otherwise (metadataValue).
func fullMetadata(t testing.TB) map[string]any {
	t.Helper()
	m := minimalMetadata()
	for _, k := range config.Keys {
		if _, skip := notRendered[k.Name]; skip || k.Section == config.SectionIgnored {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(k.Example), &v); err != nil {
			t.Fatalf("%s: its Example in the key table: %v", k.Name, err)
		}
		m[k.Name] = v
	}
	maps.Copy(m, metadataValue)
	return m
}

// metadataValue are the full metadata's values that are not a key's
// Example.
var metadataValue = map[string]any{
	// Mustache cannot tell false from absent, which renders the
	// reference's true.
	"use_alias": true,
	// The reference's SAPI key for vmapi_opts' page size, read when
	// vmapi_opts is absent.
	"vmapi_limit": 200,
}

// notRendered are the config keys the template leaves out, and why.
var notRendered = map[string]string{
	"inventory_file": "", // rendered, but a Triton zone's feed is the SDC APIs: fullMetadata leaves it out
}

// The template names every key cns reads, so a key that cnsadm config
// writes into SAPI reaches the file config-agent renders.
func TestTemplateHasEveryKey(t *testing.T) {
	tmpl, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range config.Keys {
		if k.Section == config.SectionIgnored {
			continue
		}
		if !strings.Contains(string(tmpl), `"`+k.Name+`": `) {
			t.Errorf("the template never renders %q", k.Name)
		}
	}
}

// The reference's defaults, rendered from only what SAPI always provides,
// make a config cns accepts: the reference's zone, names and APIs.
func TestTemplateMinimal(t *testing.T) {
	out := render(t, minimalMetadata())[0]
	cfg := parseRendered(t, out)
	if cfg.MyName != "cns.us-west-1.example.com" || cfg.Hostmaster != "hostmaster@example.com" {
		t.Errorf("my_name %q hostmaster %q", cfg.MyName, cfg.Hostmaster)
	}
	if len(cfg.Forward) != 1 || cfg.Forward[0].Name != "us-west-1.cns.example.com" || !slices.Equal(cfg.Forward[0].Networks, []string{"*"}) {
		t.Errorf("forward zones %+v", cfg.Forward)
	}
	if !cfg.UseAlias || cfg.UseLogin {
		t.Errorf("use_alias %v use_login %v, want true false", cfg.UseAlias, cfg.UseLogin)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}; !slices.Equal(cfg.AllowTransfer, want) {
		t.Errorf("allow_transfer %v, want %v", cfg.AllowTransfer, want)
	}
	var raw map[string]json.RawMessage
	json.Unmarshal([]byte(out), &raw)
	for key, want := range map[string]string{
		"ufds_opts":            `{"address":"ufds.us-west-1.example.com","bindDN":"cn=root","bindPassword":"s3cr3t"}`,
		"cnapi_opts":           `{"address":"cnapi.us-west-1.example.com"}`,
		"napi_opts":            `{"address":"napi.us-west-1.example.com"}`,
		"vmapi_opts":           `{"address":"vmapi.us-west-1.example.com","limit":500}`,
		"changefeed_opts":      `{"resource":"vm","subResources":["alias","customer_metadata","destroyed","internal_metadata","nics","owner_uuid","server_uuid","state","tags"],"instance":"e31ac854-f9fa-4561-b6fd-b56a9980633b"}`,
		"full_poll_interval":   `10000`,
		"reaper_poll_interval": `300000`,
		"reverse_zones":        `{}`,
	} {
		if got, want := compact(t, raw[key]), compact(t, json.RawMessage(want)); got != want {
			t.Errorf("%s: %s, want %s", key, got, want)
		}
	}
	// cns's own keys keep their defaults: nothing else is rendered.
	for _, k := range []string{"dns_listen", "db_path", "api_server", "tsig_keys", "min_notify_interval", "log_level"} {
		if _, ok := raw[k]; ok {
			t.Errorf("%s rendered from minimal metadata", k)
		}
	}
	if cfg.DBPath != "/data/cns/cns.db" || !slices.Equal(cfg.DNSListen, []string{"0.0.0.0:53", "[::]:53"}) || cfg.APIListen != nil {
		t.Errorf("db %q dns %v api %v: not cns's defaults", cfg.DBPath, cfg.DNSListen, cfg.APIListen)
	}
	checkWithBinary(t, out, 0)
}

// Every key set: each reaches the file with its value.
func TestTemplateFull(t *testing.T) {
	out := render(t, fullMetadata(t))[0]
	cfg := parseRendered(t, out)
	var raw map[string]json.RawMessage
	json.Unmarshal([]byte(out), &raw)
	for _, k := range config.Keys {
		if _, ok := raw[k.Name]; !ok && k.Section != config.SectionIgnored {
			if _, skip := notRendered[k.Name]; !skip {
				t.Errorf("%s not rendered from full metadata", k.Name)
			}
		}
	}
	if cfg.MyName != "ns0.example.com" || cfg.Hostmaster != "dns@example.com" || !cfg.UseLogin || !cfg.UseAlias {
		t.Errorf("names: %q %q login %v alias %v", cfg.MyName, cfg.Hostmaster, cfg.UseLogin, cfg.UseAlias)
	}
	var zones []string
	for _, z := range cfg.Forward {
		zones = append(zones, z.Name)
		if z.Name == "int.example.com" && (!z.HiddenPrimary || !slices.Equal(z.Peers, []string{"ns2.example.com"})) {
			t.Errorf("int.example.com: %+v", z)
		}
	}
	slices.Sort(zones)
	if !slices.Equal(zones, []string{"int.example.com", "us-west-1.cns.example.com"}) {
		t.Errorf("zones %v", zones)
	}
	if !slices.Equal(cfg.Reverse.Peers, []string{"ns1.example.com"}) {
		t.Errorf("reverse peers %v", cfg.Reverse.Peers)
	}
	wantAllow := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.2/32"), netip.MustParsePrefix("127.0.0.1/32")}
	if !slices.Equal(cfg.AllowTransfer, wantAllow) {
		t.Errorf("allow_transfer %v, want %v (SAPI's, then 127.0.0.1)", cfg.AllowTransfer, wantAllow)
	}
	if cfg.MinNotifyInterval != 250*time.Millisecond || cfg.BatchWindow != 250*time.Millisecond ||
		cfg.Hysteresis.Window != 30*time.Second || cfg.Hysteresis.LastMemberDelay != 5*time.Minute {
		t.Errorf("intervals: notify %v batch %v hysteresis %v/%v", cfg.MinNotifyInterval, cfg.BatchWindow, cfg.Hysteresis.Window, cfg.Hysteresis.LastMemberDelay)
	}
	if g := cfg.Guard; g.Window != 30*time.Second || g.MinVMs != 50 || g.Percent != 40 || g.Confirm != 15*time.Minute {
		t.Errorf("removal guard: %+v", g)
	}
	if cfg.Catalog != "catalog.example.com" || cfg.ReverseV4Prefix != 16 || cfg.ReverseV6Prefix != 48 || cfg.MaxRRset != 50 {
		t.Errorf("catalog %q reverse /%d /%d max_rrset %d", cfg.Catalog, cfg.ReverseV4Prefix, cfg.ReverseV6Prefix, cfg.MaxRRset)
	}
	if len(cfg.TSIGKeys) != 1 || cfg.TSIGKeys[0].Name != "xfr-key" || cfg.PeerKeys["ns1.example.com"] != "xfr-key" {
		t.Errorf("tsig %+v peers %v", cfg.TSIGKeys, cfg.PeerKeys)
	}
	if cfg.Propagation.ThresholdPercent != 50 || cfg.Propagation.PollInterval != 300*time.Millisecond {
		t.Errorf("propagation %+v", cfg.Propagation)
	}
	if !slices.Equal(cfg.DNSListen, []string{"0.0.0.0:53", "[::]:53", "127.0.0.1:5353"}) {
		t.Errorf("dns_listen %v", cfg.DNSListen)
	}
	if want := []netip.AddrPort{netip.MustParseAddrPort("10.1.1.1:53"), netip.MustParseAddrPort("10.1.1.2:5300")}; !slices.Equal(cfg.AlsoNotify, want) {
		t.Errorf("also_notify %v, want %v", cfg.AlsoNotify, want)
	}
	if want := []netip.Addr{netip.MustParseAddr("10.1.1.1"), netip.MustParseAddr("10.1.1.3")}; !slices.Equal(cfg.Signers, want) {
		t.Errorf("signers %v, want %v", cfg.Signers, want)
	}
	if cfg.DBPath != "/data/cns/other.db" || cfg.LogLevel != "debug" || cfg.APIToken != "write-token" || cfg.APIReadToken != "read-token" || cfg.APIListen != nil {
		t.Errorf("db %q log %q api %q/%q listen %v", cfg.DBPath, cfg.LogLevel, cfg.APIToken, cfg.APIReadToken, cfg.APIListen)
	}
	if !cfg.HideVersion || !cfg.HideIdentity || cfg.RRL.ResponsesPerSecond != 10 || cfg.RRL.Slip != 3 {
		t.Errorf("hide %v/%v rrl %+v", cfg.HideVersion, cfg.HideIdentity, cfg.RRL)
	}
	if len(cfg.Forwarding.Upstreams) != 1 || cfg.Forwarding.Upstreams[0] != netip.MustParseAddrPort("10.0.0.2:53") {
		t.Errorf("forwarding %+v", cfg.Forwarding)
	}
	if cfg.Journal.MaxEntries != 500 || cfg.Journal.MaxBytes != 1048576 || cfg.Journal.MaxAge != 24*time.Hour {
		t.Errorf("journal %+v", cfg.Journal)
	}
	for key, want := range map[string]string{
		"ufds_opts":       `{"address":"ufds.example.net","bindDN":"cn=other","bindPassword":"pw"}`,
		"vmapi_opts":      `{"address":"vmapi.example.net","limit":300}`,
		"changefeed_opts": `{"resource":"vm","subResources":["state"],"instance":"abc"}`,
	} {
		if got, want := compact(t, raw[key]), compact(t, json.RawMessage(want)); got != want {
			t.Errorf("%s: %s, want %s (the metadata's object)", key, got, want)
		}
	}
	checkWithBinary(t, out, 0)
}

// Any combination of optional keys renders valid JSON that cns accepts:
// each key alone on top of the minimal metadata, and every key but one.
func TestTemplateKeyCombinations(t *testing.T) {
	full, minimal := fullMetadata(t), minimalMetadata()
	var optional []string
	for k := range full {
		if _, ok := minimal[k]; !ok {
			optional = append(optional, k)
		}
	}
	slices.Sort(optional)
	var sets []map[string]any
	var names []string
	for _, k := range optional {
		alone := minimalMetadata()
		alone[k] = full[k]
		if k == "peer_keys" || k == "aggregate" { // names a key of tsig_keys
			alone["tsig_keys"] = full["tsig_keys"]
		}
		sets = append(sets, alone)
		names = append(names, "only "+k)
		if k == "tsig_keys" {
			continue // peer_keys needs it
		}
		without := fullMetadata(t)
		delete(without, k)
		sets = append(sets, without)
		names = append(names, "all but "+k)
	}
	for i, out := range render(t, sets...) {
		t.Run(names[i], func(t *testing.T) { parseRendered(t, out) })
	}
}

// A list renders whole up to the template's slots (8 for dns_listen);
// more is refused by name instead of silently cut.
func TestTemplateListSlots(t *testing.T) {
	eight, nine := minimalMetadata(), minimalMetadata()
	var addrs []any
	for i := 0; i < 9; i++ {
		addrs = append(addrs, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(5300+i)).String())
	}
	eight["dns_listen"], nine["dns_listen"] = addrs[:8], addrs
	outs := render(t, eight, nine)
	cfg := parseRendered(t, outs[0])
	if len(cfg.DNSListen) != 8 || cfg.DNSListen[7] != "127.0.0.1:5307" {
		t.Errorf("8 addresses rendered as %v", cfg.DNSListen)
	}
	_, err := config.Parse([]byte(outs[1]), "config.json")
	if err == nil || !strings.Contains(err.Error(), "dns_listen") {
		t.Errorf("9 addresses: %v, want an error naming dns_listen", err)
	}
	checkWithBinary(t, outs[1], 96)
}

// registrar's config, rendered from the cns instance's metadata: the
// name CloudAPI, sdc-docker and triton-prometheus look cns up by
// (SERVICE_DOMAIN, which sdcadm post-setup cns sets; else the same name
// from the data center's), the admin address, and binder's ZooKeeper
// servers however many there are.
func TestRegistrarTemplate(t *testing.T) {
	zk := func(n int) []any {
		var servers []any
		for i := 1; i <= n; i++ {
			s := map[string]any{"host": fmt.Sprintf("10.99.99.%d", 10+i), "port": 2181, "num": i}
			if i == n {
				s["last"] = true
			}
			servers = append(servers, s)
		}
		return servers
	}
	withDomain, without := minimalMetadata(), minimalMetadata()
	withDomain["SERVICE_DOMAIN"] = "cns.us-west-1.example.com"
	withDomain["ZK_SERVERS"], without["ZK_SERVERS"] = zk(1), zk(3)
	for _, m := range []map[string]any{withDomain, without} {
		m["auto"] = map[string]any{"ADMIN_IP": "10.99.99.40"}
	}
	outs := renderTemplate(t, "sapi_manifests/registrar/template", withDomain, without)
	for i, zkCount := range []int{1, 3} {
		var reg registrarConfig
		if err := json.Unmarshal([]byte(outs[i]), &reg); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, outs[i])
		}
		r := reg.Registration
		if r.Domain != "cns.us-west-1.example.com" || r.Type != "load_balancer" || r.Service.Type != "service" ||
			r.Service.Service.Srvce != "_http" || r.Service.Service.Proto != "_tcp" || r.Service.Service.Port != config.DefaultAPIPort {
			t.Errorf("registration %+v", r)
		}
		if reg.AdminIP != "10.99.99.40" || len(reg.Zookeeper.Servers) != zkCount ||
			reg.Zookeeper.Servers[zkCount-1] != (zkServer{fmt.Sprintf("10.99.99.%d", 10+zkCount), 2181}) {
			t.Errorf("adminIp %q zookeeper %+v", reg.AdminIP, reg.Zookeeper)
		}
	}
	var manifest struct{ Name, Path string }
	raw, _ := os.ReadFile("sapi_manifests/registrar/manifest.json")
	if err := json.Unmarshal(raw, &manifest); err != nil || manifest.Name != "registrar" || manifest.Path != "/opt/smartdc/registrar/etc/config.json" {
		t.Errorf("registrar manifest %+v %v: want name registrar, registrar's config path", manifest, err)
	}
}

// registrarConfig is what registrar reads (joyent/registrar's README,
// "Configuration reference").
type registrarConfig struct {
	Registration struct {
		Domain, Type string
		Service      struct {
			Type    string
			Service struct {
				Srvce, Proto string
				Port         int
			}
		}
	}
	Zookeeper struct {
		Servers []zkServer
	}
	AdminIP string
}

type zkServer struct {
	Host string
	Port int
}

// render renders cns's template with config-agent's hogan.js.
func render(t *testing.T, metadata ...map[string]any) []string {
	t.Helper()
	return renderTemplate(t, templatePath, metadata...)
}

// renderTemplate renders a template with config-agent's hogan.js, once
// per metadata set, in one node process.
func renderTemplate(t *testing.T, template string, metadata ...map[string]any) []string {
	if testing.Short() {
		t.Skip("-short: runs config-agent's renderer on Node")
	}
	t.Helper()
	dir := hoganDir(t)
	in, _ := json.Marshal(metadata)
	cmd := exec.Command("node", filepath.Join(dir, "render.js"), template)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	cmd.Stdin = strings.NewReader(string(in))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render: %v\n%s", err, stderr.String())
	}
	var files []string
	if err := json.Unmarshal(out, &files); err != nil || len(files) != len(metadata) {
		t.Fatalf("render: %v: %.200s", err, out)
	}
	return files
}

// hoganDir installs (once per cache) hogan.js as config-agent has it.
func hoganDir(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (Debian packages nodejs and npm): the template is rendered with config-agent's hogan.js", tool)
		}
	}
	var stderr strings.Builder
	cmd := exec.Command("bash", "testdata/hogan/install.sh")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("testdata/hogan/install.sh: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// parseRendered checks that out is JSON and a config cns accepts.
func parseRendered(t *testing.T, out string) *config.Config {
	t.Helper()
	if !json.Valid([]byte(out)) {
		t.Fatalf("rendered config is not JSON:\n%s", out)
	}
	cfg, err := config.Parse([]byte(out), "config.json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, w := range cfg.Warnings {
		t.Errorf("warning: %s", w)
	}
	return cfg
}

// checkWithBinary runs the released binary's `serve --check` on out, as
// the SMF start method does, and wants exit status code.
func checkWithBinary(t *testing.T, out string, code int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(releasedBinary(t), "serve", "-c", path, "--check")
	got, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != code {
		t.Errorf("cns serve --check: %v, want exit %d\n%s", err, code, got)
	}
}

// compact is raw in a canonical form (object keys sorted), to compare
// by meaning.
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Errorf("%s: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
