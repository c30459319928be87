package main

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
	"github.com/tritondatacenter/cns/smf"
)

// The SMF method script (smf's TestServiceManifests checks the manifest
// that runs it) is valid sh and runs commands this binary has, and the
// binary's --check exits as the script expects.
func TestSMFMethodRunsTheBinary(t *testing.T) {
	// `cns serve -c ... --check`, then `cns serve -c ...`.
	script, err := os.ReadFile("smf/method/cns")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-n", "smf/method/cns").CombinedOutput(); err != nil {
		t.Errorf("method script: %v %s", err, out)
	}
	for _, want := range []string{"/opt/triton/cns/bin/cns", `serve -c "$CONFIG" --check`, `serve -c "$CONFIG" &`} {
		if !strings.Contains(string(script), want) {
			t.Errorf("method script lacks %q", want)
		}
	}
	if _, stderr, code := runCNS(t, "serve", "-c", "testdata/cns.json", "--check"); code != 0 {
		t.Errorf("cns serve --check on a good config: exit %d %s", code, stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"my_name": 7}`), 0o644)
	if _, _, code := runCNS(t, "serve", "-c", bad, "--check"); code != smf.ExitConfig {
		t.Errorf("cns serve --check on a bad config: exit %d, want %d", code, smf.ExitConfig)
	}
}

// The systemd unit passes systemd-analyze verify, with its binary path
// pointed at the built binary.
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile("smf/cns.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ExecReload=/bin/kill -HUP $MAINPID", "RestartPreventExitStatus=96", "AmbientCapabilities=CAP_NET_BIND_SERVICE"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian package systemd); unit checked by content only")
	}
	path := filepath.Join(t.TempDir(), "cns.service")
	os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/cns", cnsBin(t))), 0o644)
	out, err := exec.Command(tool, "verify", path).CombinedOutput()
	if err != nil || strings.Contains(string(out), "cns.service:") {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// SIGHUP applies a good config (log level, zones) and keeps the running
// one when the new file is bad; every log line is a bunyan JSON object.
func TestReloadAndLogFormat(t *testing.T) {
	dir := t.TempDir()
	cfgPath := testConfig(t, dir, "testdata/inventory.json", nil)
	p := startCNS(t, cfgPath)
	p.waitCommitted(0)
	var cfg map[string]any
	data, _ := os.ReadFile(cfgPath)
	json.Unmarshal(data, &cfg)

	// Bad file: refused, the server keeps serving.
	os.WriteFile(cfgPath, []byte(`{"my_name": "x", "hostmaster": "nobody"}`), 0o644)
	mark := p.mark()
	p.cmd.Process.Signal(syscall.SIGHUP)
	l := p.waitLogFrom(mark, 10*time.Second, func(l logLine) bool { return strings.HasPrefix(l.str("msg"), "configuration not reloaded") })
	if !strings.Contains(l.str("err"), "hostmaster") || l["level"] != 50.0 {
		t.Errorf("bad reload log: %v", l)
	}
	if r := p.query("udp", "cloudapi."+demoZone, dns.TypeA); len(r.Answer) != 1 {
		t.Error("not serving after a bad reload")
	}

	// Good file: debug logging and a new zone, live.
	cfg["log_level"] = "debug"
	fz := cfg["forward_zones"].(map[string]any)
	fz["extra.example.net"] = map[string]any{"networks": []string{"*"}}
	data, _ = json.Marshal(cfg)
	os.WriteFile(cfgPath, data, 0o644)
	mark = p.mark()
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitLogFrom(mark, 10*time.Second, func(l logLine) bool { return l.str("msg") == "configuration reloaded" })
	p.waitCommitted(mark)
	if r := p.query("udp", "extra.example.net", dns.TypeSOA); len(r.Answer) != 1 {
		t.Errorf("zone added by reload not served: %v", r)
	}

	p.stop(syscall.SIGTERM)
	lines := strings.Split(strings.TrimSpace(p.log()), "\n")
	sawDebug := false
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("log line %d is not JSON: %q", i, line)
			continue
		}
		for _, k := range []string{"name", "hostname", "pid", "level", "msg", "time", "v"} {
			if _, ok := m[k]; !ok {
				t.Errorf("log line %d lacks %q: %s", i, k, line)
			}
		}
		sawDebug = sawDebug || m["level"] == 20.0
		if strings.Contains(line, "secret") && strings.Contains(line, "bindPassword") {
			t.Errorf("a secret reached the log: %s", line)
		}
	}
	if !sawDebug {
		t.Error("no debug line after log_level became debug")
	}
	if p.cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("SIGTERM exit %d, want 0", p.cmd.ProcessState.ExitCode())
	}
}

// SIGTERM in the middle of a big first commit: the process does not wait
// for the batch (it gives up, and says so), exits within seconds and
// leaves a consistent db. Before it gave up, a shutdown here waited for
// the whole 20k-VM batch: 6.8-7.1 s under the race detector, and CI once
// took 8.2 s.
func TestShutdownDuringCommit(t *testing.T) {
	dir := t.TempDir()
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 20000, Seed: 3})
	invPath := filepath.Join(dir, "gen.json")
	writeInventory(t, invPath, inv)
	cfg := testConfig(t, dir, "", func(c map[string]any) { c["inventory_file"] = invPath })
	p := startCNS(t, cfg)
	p.waitLog(30*time.Second, func(l logLine) bool { return l.str("msg") == "inventory applied" })
	start := time.Now()
	p.stop(syscall.SIGTERM)
	// What shows the batch was not waited for is the log below (the
	// batch given up, nothing committed after SIGTERM); the time is a
	// hang guard with room for two loaded CPUs under -race.
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("shutdown took %v", took)
	} else {
		t.Logf("shutdown took %v", took.Round(time.Millisecond))
	}
	p.waitLog(time.Second, func(l logLine) bool {
		return l.str("msg") == "shutting down: batch not committed; the next start computes it again"
	})
	p.mu.Lock()
	for _, l := range p.lines {
		if vms, _ := l["vms"].(float64); l.str("msg") == "committed" && vms > 0 {
			t.Errorf("the batch was committed after SIGTERM: %v", l)
		}
	}
	p.mu.Unlock()
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	if out, stderr, code := runCNS(t, "db", "--db", filepath.Join(dir, "cns.db"), "check"); code != 0 {
		t.Fatalf("db after shutdown: %s%s", out, stderr)
	}
}

// A port in use stops cns at once, naming the address.
func TestPortInUse(t *testing.T) {
	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.LocalAddr().String()
	dir := t.TempDir()
	cfg := testConfig(t, dir, "testdata/inventory.json", func(c map[string]any) { c["dns_listen"] = []string{addr} })
	_, stderr, code := runCNS(t, "serve", "-c", cfg)
	if code == 0 || !strings.Contains(stderr, addr) || !strings.Contains(stderr, "in use") {
		t.Errorf("port in use: exit %d: %s", code, stderr)
	}
}
