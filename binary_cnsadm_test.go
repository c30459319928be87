package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin"
)

// startWithAPI runs the demo data center with the API on an ephemeral
// port and returns the process, its API address and its config path.
func startWithAPI(t *testing.T, edits ...func(map[string]any)) (*proc, string, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := testConfig(t, dir, "testdata/inventory.json", func(c map[string]any) {
		c["api_server"] = map[string]any{"listen": "127.0.0.1:0"}
		for _, edit := range edits {
			edit(c)
		}
	})
	p := startCNS(t, cfg)
	l := p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" })
	p.waitCommitted(0)
	return p, "http://" + l.str("addr"), cfg
}

var (
	admSerialRE = regexp.MustCompile(`\b1[7-9]\d{8}\b`)
	admAgoRE    = regexp.MustCompile(`\d+ (sec|min|hr|day|wk)s? ago`)
	admMsRE     = regexp.MustCompile(`\d+\.\d ms`)
	admGapRE    = regexp.MustCompile(`  +`)
)

// normalizeAdmValues replaces what changes from run to run (serials,
// times) and keeps the layout to the space: for the verbs whose output
// follows the reference's layout, where those values end their line.
func normalizeAdmValues(s string) string {
	s = admSerialRE.ReplaceAllString(s, "SERIAL")
	s = admMsRE.ReplaceAllString(s, "N ms")
	return admAgoRE.ReplaceAllString(s, "N ago")
}

func normalizeAdm(s string) string {
	s = normalizeAdmValues(s)
	// Column widths follow the values normalised away; compare the cells.
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = admGapRE.ReplaceAllString(strings.TrimRight(l, " "), "  ")
	}
	return strings.Join(lines, "\n")
}

func admGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "cnsadm", name+".txt")
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, []byte(got), 0o644)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil || string(want) != got {
		t.Errorf("cnsadm %s differs from %s (go test -run TestCnsadmOutput . -update rewrites it; then review):\n%s", name, path, got)
	}
}

// cnsadm's read verbs against a running server, compared with goldens.
// Those of vm, peers ADDR, zones, zones ZONE and config are written by
// hand from the reference cnsadm's layout, and compared to the space.
func TestCnsadmOutput(t *testing.T) {
	t.Setenv("COLUMNS", "80")
	// A secondary on 127.0.0.1 that the config names, and its transfer,
	// so there is a peer to show (an unnamed loopback client is none).
	p, api, cfg := startWithAPI(t, mirrorSecondary(t))
	tr := new(dns.Transfer)
	m := new(dns.Msg)
	m.SetAxfr(demoZone + ".")
	ch, err := tr.In(m, p.addr)
	if err != nil {
		t.Fatal(err)
	}
	for range ch {
	}
	// Every zone's serial reaches the secondary (cnsadm wait), and its
	// probe after the transfer is answered: the output no longer moves.
	c := admin.NewClient(api, "")
	zones, err := c.Zones(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, z := range zones {
		if out, _, code := runCNS(t, "adm", "--api", api, "wait", z.Name, "--timeout", "20s"); code != 0 || !strings.Contains(out, ": ACTIVE") {
			t.Fatalf("wait %s: exit %d: %s", z.Name, code, out)
		}
	}
	waitFor(t, "the probe after the transfer", 10*time.Second, func() bool {
		p, err := c.Peer(context.Background(), "127.0.0.1")
		return err == nil && p.Counters["goodxfer"] == 1
	})
	for _, tc := range []struct {
		name  string
		args  []string
		exact bool // the reference's layout, to the space
	}{
		{"status", []string{"status"}, false},
		{"vm-listed", []string{"vm", "b752d788-c0e4-4307-8c56-353a4ea66c02"}, true},
		{"vm-unlisted", []string{"vm", "e76f7f8b-fb63-4c58-adf4-5b275a0d5aa6"}, true},
		{"vm-stopped", []string{"vm", "b9974d54-9a8f-4f94-b667-d41ae9d26935"}, true},
		{"peers", []string{"peers"}, false},
		{"peer", []string{"peers", "127.0.0.1"}, true},
		{"zones", []string{"zones"}, true},
		{"zone", []string{"zones", demoZone}, true},
		{"zone-reverse", []string{"zones", "reverse"}, true},
		{"config", []string{"config"}, true},
		{"history", []string{"history", demoZone}, false},
		{"feeds", []string{"feeds"}, false},
		{"services", []string{"services"}, false},
		{"service", []string{"services", "6c96670e-4204-4bc0-bd64-b4c576c09876", "web"}, false},
		{"service", []string{"services", "alice", "web"}, false}, // by login, the same
	} {
		args := append([]string{"adm", "--api", api, "--config-file", cfg}, tc.args...)
		out, stderr, code := runCNS(t, args...)
		if code != 0 {
			t.Errorf("cnsadm %s: exit %d: %s", tc.name, code, stderr)
			continue
		}
		if tc.exact {
			admGolden(t, tc.name, normalizeAdmValues(out))
		} else {
			admGolden(t, tc.name, normalizeAdm(out))
		}
	}

	// --json prints the API's JSON.
	out, _, code := runCNS(t, "adm", "--api", api, "--json", "vm", "b752d788-c0e4-4307-8c56-353a4ea66c02")
	var v map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v["uuid"] != "b752d788-c0e4-4307-8c56-353a4ea66c02" {
		t.Errorf("--json vm: exit %d: %s", code, out)
	}
	// --json services keeps the API's fields, the names added.
	out, _, code = runCNS(t, "adm", "--api", api, "--json", "services", "alice", "web")
	var svc map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &svc) != nil || svc["owner_uuid"] != "6c96670e-4204-4bc0-bd64-b4c576c09876" || svc["login"] != "alice" {
		t.Errorf("--json services alice web: exit %d: %s", code, out)
	}
	if _, stderr, code := runCNS(t, "adm", "--api", api, "services", "mallory", "web"); code != 1 || !strings.Contains(stderr, "not found") {
		t.Errorf("services of an unknown login: exit %d: %s", code, stderr)
	}
	// An unknown VM is a clear message, not a crash.
	_, stderr, code := runCNS(t, "adm", "--api", api, "vm", "00000000-0000-4000-8000-000000000000")
	if code != 1 || !strings.Contains(stderr, "not found") {
		t.Errorf("unknown vm: exit %d: %s", code, stderr)
	}
	// wait once the peer serves the zone is done at once.
	out, _, code = runCNS(t, "adm", "--api", api, "wait", demoZone, "--timeout", "2s")
	if code != 0 || !strings.Contains(out, ": ACTIVE") {
		t.Errorf("wait: exit %d: %s", code, out)
	}
	// peers -d forgets the peer.
	if _, stderr, code := runCNS(t, "adm", "--api", api, "peers", "-d", "127.0.0.1"); code != 0 {
		t.Errorf("peers -d: %s", stderr)
	}
	if _, stderr, code := runCNS(t, "adm", "--api", api, "peers", "127.0.0.1"); code == 0 || !strings.Contains(stderr, "not found") {
		t.Errorf("deleted peer still shown: %s", stderr)
	}
}

// cnsadm config and zones validate, write the config file and make the
// server reload it; a change that does not validate is not written.
func TestCnsadmEditsConfig(t *testing.T) {
	p, api, cfg := startWithAPI(t)
	adm := func(args ...string) (string, string, int) {
		return runCNS(t, append([]string{"adm", "--api", api, "--config-file", cfg}, args...)...)
	}
	loginName := "web0.inst.alice." + demoZone
	if r := p.query("udp", loginName, dns.TypeA); len(r.Answer) == 0 {
		t.Fatalf("%s not served before the change", loginName)
	}
	before, _ := os.ReadFile(cfg)

	// Invalid edits are refused and leave the file alone: exit 2 when the
	// new configuration does not validate, 1 for a bad argument, as the
	// reference's.
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"config", "hostmaster=nobody"}, 2},
		{[]string{"config", "use_login=perhaps"}, 1},
		{[]string{"zones", demoZone, "networks=public"}, 2},
		{[]string{"zones", "-a", "bad zone!", "networks=*"}, 2},
		{[]string{"config", "allow_transfer-=10.9.9.9"}, 1},
		{[]string{"config", "foo=bar"}, 1},
	} {
		if _, stderr, code := adm(tc.args...); code != tc.code || stderr == "" {
			t.Errorf("cnsadm %v: exit %d, want %d: %s", tc.args, code, tc.code, stderr)
		}
	}
	if after, _ := os.ReadFile(cfg); string(after) != string(before) {
		t.Fatal("a refused edit changed the config file")
	}

	// A good edit: the file changes and the running server applies it.
	mark := p.mark()
	if out, stderr, code := adm("config", "use_login=false", "allow_transfer+=10.0.0.0/8"); code != 0 {
		t.Fatalf("config edit: %s %s", out, stderr)
	}
	p.waitLogFrom(mark, 10*time.Second, func(l logLine) bool { return l.str("msg") == "configuration reloaded" })
	p.waitCommitted(mark)
	if r := p.query("udp", loginName, dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Errorf("login name still served after use_login=false: %v", r.Answer)
	}
	var c map[string]any
	data, _ := os.ReadFile(cfg)
	json.Unmarshal(data, &c)
	if c["use_login"] != false || !strings.Contains(string(data), "10.0.0.0/8") || c["inventory_file"] == nil {
		t.Errorf("config file after edit: %s", data)
	}

	// A new zone.
	mark = p.mark()
	if _, stderr, code := adm("zones", "-a", "extra.example.com", "networks=*"); code != 0 {
		t.Fatalf("zones -a: %s", stderr)
	}
	p.waitLogFrom(mark, 10*time.Second, func(l logLine) bool { return l.str("msg") == "configuration reloaded" })
	p.waitCommitted(mark)
	if r := p.query("udp", "extra.example.com", dns.TypeSOA); len(r.Answer) != 1 {
		t.Errorf("new zone not served: %v", r)
	}
	if out, _, _ := adm("zones"); !strings.Contains(out, "extra.example.com") {
		t.Errorf("zones list lacks the new zone:\n%s", out)
	}
	if _, stderr, code := adm("zones", "-d", "extra.example.com"); code != 0 {
		t.Fatalf("zones -d: %s", stderr)
	}
}

// cnsadm exits as the reference's does: 1 for a usage error or when it
// cannot talk to cns, 2 when the configuration does not validate; an
// unknown key names the keys cnsadm config edits.
func TestCnsadmExitCodes(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "", nil)
	invalid := filepath.Join(dir, "invalid.json")
	os.WriteFile(invalid, []byte(`{"my_name": "cns.example.com", "forward_zones": {}}`), 0o600)
	down := "http://127.0.0.1:1" // nothing listens there
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no verb", []string{"adm"}, 1, ""},
		{"unknown verb", []string{"adm", "frobnicate"}, 1, ""},
		{"missing argument", []string{"adm", "vm"}, 1, ""},
		{"unknown flag", []string{"adm", "status", "--frob"}, 1, ""},
		{"bad modifier", []string{"adm", "--config-file", cfg, "config", "not a modifier"}, 1, "is not a modifier"},
		{"unknown key", []string{"adm", "--config-file", cfg, "config", "foo=bar"}, 1, "it edits my_name, hostmaster, use_login, use_alias, allow_transfer,"},
		{"no server", []string{"adm", "--api", down, "status"}, 1, "connection refused"},
		{"new config invalid", []string{"adm", "--api", down, "--config-file", cfg, "config", "hostmaster=nobody"}, 2, "hostmaster"},
		{"current config invalid", []string{"adm", "--api", down, "--config-file", invalid, "config", "use_login=true"}, 2, "hostmaster"},
		{"help", []string{"adm", "--help"}, 0, ""},
		{"nothing to upgrade", []string{"adm", "--api", down, "--config-file", cfg, "upgrade"}, 0, "no schema upgrades required"},
	} {
		_, stderr, code := runCNS(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%s: exit %d, want %d; stderr: %s", tc.name, code, tc.code, stderr)
		}
	}
	// cns serve keeps SMF's code for a bad config.
	if _, _, code := runCNS(t, "serve", "--check", "--config", invalid); code != 96 {
		t.Errorf("serve --check of an invalid config: exit %d, want 96", code)
	}
}

// cns db reads fixture files, refuses corrupt ones with a message, and
// refuses a file a running server holds, pointing at cns adm backup.
func TestDBCommands(t *testing.T) {
	p, api, cfg := startWithAPI(t)
	dir := filepath.Dir(cfg)
	dbPath := filepath.Join(dir, "cns.db")

	_, stderr, code := runCNS(t, "db", "--db", dbPath, "zones")
	if code == 0 || !strings.Contains(stderr, "locked") || !strings.Contains(stderr, "cns adm backup") {
		t.Errorf("db held by a server: exit %d: %s", code, stderr)
	}
	backup := filepath.Join(dir, "copy.db")
	if _, stderr, code := runCNS(t, "adm", "--api", api, "backup", backup); code != 0 {
		t.Fatalf("adm backup: %s", stderr)
	}
	p.stop(syscall.SIGTERM)

	for _, args := range [][]string{
		{"info"}, {"info", "--space"}, {"zones"}, {"check"}, {"journal", demoZone}, {"peers"},
		{"vm", "b752d788-c0e4-4307-8c56-353a4ea66c02"}, {"export", demoZone},
	} {
		for _, f := range []string{dbPath, backup} {
			out, stderr, code := runCNS(t, append([]string{"db", "--db", f}, args...)...)
			if code != 0 || out == "" {
				t.Errorf("cns db %v on %s: exit %d: %s", args, filepath.Base(f), code, stderr)
			}
		}
	}
	if out, _, _ := runCNS(t, "db", "--db", backup, "info"); !strings.Contains(out, "vms:     24\nservers: 4\n") {
		t.Errorf("backup info:\n%s", out)
	}
	if out, _, _ := runCNS(t, "db", "--db", backup, "info", "--space"); !strings.Contains(out, "zones/"+demoZone+"/names") || !strings.Contains(out, "(free pages, meta, freelist)") {
		t.Errorf("backup info --space:\n%s", out)
	}
	if _, _, code := runCNS(t, "db", "--db", dbPath, "vm", "00000000-0000-4000-8000-000000000000"); code == 0 {
		t.Error("unknown VM: exit 0")
	}
	copy2 := filepath.Join(dir, "copy2.db")
	if _, stderr, code := runCNS(t, "db", "--db", dbPath, "backup", copy2); code != 0 {
		t.Errorf("db backup: %s", stderr)
	}

	// A corrupt file: a clear error, and the file is left as it was.
	bad := filepath.Join(dir, "bad.db")
	data, _ := os.ReadFile(backup)
	for i := 2 * 4096; i < len(data); i++ {
		data[i] ^= 0x5a // scramble every page but the two meta pages
	}
	os.WriteFile(bad, data, 0o600)
	for _, args := range [][]string{{"info"}, {"check"}, {"zones"}, {"export", demoZone}} {
		_, stderr, code := runCNS(t, append([]string{"db", "--db", bad}, args...)...)
		if strings.Contains(stderr, "goroutine ") {
			t.Errorf("corrupt db %v crashed: %s", args, stderr)
		}
		if args[0] == "check" && code == 0 {
			t.Errorf("corrupt db passed check")
		}
	}
	after, _ := os.ReadFile(bad)
	if string(after) != string(data) {
		t.Error("reading a corrupt db changed it")
	}
}

// Installed as cnsadm, the binary is cnsadm: its usage and help name
// `cnsadm <command>`, as the reference's do, never `cnsadm adm`; a
// missing or unknown command exits 1.
func TestCnsadmUsage(t *testing.T) {
	cnsadm := filepath.Join(t.TempDir(), "cnsadm")
	if err := os.Symlink(cnsBin(t), cnsadm); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"--help"}, {"bogus"}, {"zones", "--help"}} {
		cmd := exec.Command(cnsadm, args...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		wantCode := 1
		if len(args) > 0 && args[len(args)-1] == "--help" {
			wantCode = 0
		}
		if code != wantCode || !strings.Contains(string(out), "Usage: cnsadm ") || strings.Contains(string(out), "cnsadm adm") {
			t.Errorf("cnsadm %v: exit %d (want %d):\n%s", args, code, wantCode, out)
		}
	}
}
