package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/tritondatacenter/cns/admin/config"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The harness of the whole-program tests. Two ways to run cns:
//   - startCNS runs the real binary (built once, lazily, by the first test
//     that needs it; with -race when the tests run with -race) and reads
//     its bunyan log;
//   - startService builds the program in-process through newService, the
//     same wiring `cns serve` uses, for tests that need its parts (the
//     store, the updater, the feed's status).
// Both take a config written by testConfig.

// TestMain removes the binary the tests built, if any.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// raceBuild is set by race_test.go under -race.
var raceBuild bool

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// cnsBin returns the path of the cns binary, building it the first time.
// Under `go test -race` the binary is built with -race too, so the server
// the end-to-end tests drive is watched by the race detector.
func cnsBin(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "cns-e2e"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "cns")
		args := []string{"build", "-o", binPath}
		if raceBuild {
			args = append(args, "-race")
		}
		if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
			binErr = fmt.Errorf("build cns: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// testConfig writes a config derived from testdata/cns.json into dir: its
// own db, an ephemeral port, and inventory (copied into dir when it names
// a file). It returns the config's path.
func testConfig(t *testing.T, dir, inventory string, edit func(map[string]any)) string {
	return writeConfig(t, dir, inventory, edit)
}

// writeConfig is testConfig for tests and benchmarks alike.
func writeConfig(t testing.TB, dir, inventory string, edit func(map[string]any)) string {
	t.Helper()
	raw, err := os.ReadFile("testdata/cns.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["db_path"] = filepath.Join(dir, "cns.db")
	cfg["dns_listen"] = []string{"127.0.0.1:0"}
	// No API unless the test asks for one: the default (port 80 on
	// loopback) would collide between tests.
	cfg["api_server"] = map[string]any{"listen": []string{}}
	if inventory != "" {
		data, err := os.ReadFile(inventory)
		if err != nil {
			t.Fatal(err)
		}
		inv := filepath.Join(dir, "inventory.json")
		if err := os.WriteFile(inv, data, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg["inventory_file"] = inv
	}
	if edit != nil {
		edit(cfg)
	}
	out, _ := json.MarshalIndent(cfg, "", "  ")
	path := filepath.Join(dir, "cns.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// logLine is one bunyan record.
type logLine map[string]any

func (l logLine) str(k string) string { s, _ := l[k].(string); return s }

// proc is a running cns serve.
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	addr  string // the DNS address
	start time.Time

	mu    sync.Mutex
	lines []logLine
	raw   []string
	grew  chan struct{} // closed and replaced when lines grow
	done  chan struct{}
}

// startCNS runs `cns serve -c cfg` and waits until it listens.
func startCNS(t *testing.T, cfg string) *proc {
	t.Helper()
	return startCNSEnv(t, cfg)
}

// startCNSEnv is startCNS with extra environment variables (KEY=value).
func startCNSEnv(t *testing.T, cfg string, env ...string) *proc {
	t.Helper()
	p := &proc{t: t, grew: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command(cnsBin(t), "serve", "-c", cfg)
	p.cmd.Env = append(os.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read(stderr)
	t.Cleanup(func() { p.stop(syscall.SIGKILL) })
	l := p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "listening" })
	p.addr = l.str("udp")
	return p
}

func (p *proc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l logLine
		_ = json.Unmarshal(sc.Bytes(), &l)
		p.mu.Lock()
		p.raw = append(p.raw, sc.Text())
		if l != nil {
			p.lines = append(p.lines, l)
		}
		close(p.grew)
		p.grew = make(chan struct{})
		p.mu.Unlock()
	}
	p.cmd.Wait()
	close(p.done)
}

// waitLog waits for a log line matching pred, from the start of the log.
func (p *proc) waitLog(timeout time.Duration, pred func(logLine) bool) logLine {
	p.t.Helper()
	return p.waitLogFrom(0, timeout, pred)
}

// mark returns the current length of the log, for waitLogFrom.
func (p *proc) mark() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}

func (p *proc) waitLogFrom(from int, timeout time.Duration, pred func(logLine) bool) logLine {
	p.t.Helper()
	deadline := time.After(timeout)
	for i := from; ; {
		p.mu.Lock()
		for ; i < len(p.lines); i++ {
			if pred(p.lines[i]) {
				l := p.lines[i]
				p.mu.Unlock()
				return l
			}
		}
		grew := p.grew
		p.mu.Unlock()
		select {
		case <-grew:
		case <-p.done:
			p.t.Fatalf("cns exited while waiting; log:\n%s", p.log())
		case <-deadline:
			p.t.Fatalf("timed out waiting for a log line; log:\n%s", p.log())
		}
	}
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.raw, "\n")
}

// stop signals the process and waits for it to exit.
func (p *proc) stop(sig syscall.Signal) {
	if p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// waitCommitted waits for the first "committed" line after mark.
func (p *proc) waitCommitted(mark int) logLine {
	p.t.Helper()
	return p.waitLogFrom(mark, 20*time.Second, func(l logLine) bool { return l.str("msg") == "committed" && l["pending"] == 0.0 })
}

// query asks the server over proto ("udp" or "tcp").
func (p *proc) query(proto, name string, qtype uint16) *dns.Msg {
	p.t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(4096, false)
	c := &dns.Client{Net: proto, Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, p.addr)
	if err != nil {
		p.t.Fatalf("%s %s over %s: %v", name, dns.TypeToString[qtype], proto, err)
	}
	return r
}

// runCNS runs the binary to completion and returns stdout, stderr and the
// exit code.
func runCNS(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(cnsBin(t), args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// running is cns built in-process by newService from a config file and
// started: the program cns serve runs, with its parts at hand.
type running struct {
	*service
	addr   string // the first DNS address (UDP and TCP)
	api    string // the API's base URL, when api_server is configured
	cancel context.CancelFunc
}

// startService builds cns from the config at cfgPath with newService, as
// cns serve does, and starts it; the test's cleanup stops it.
func startService(t testing.TB, cfgPath string, tune serviceTuning) *running {
	t.Helper()
	return startServiceLogged(t, cfgPath, quietLogger(), tune)
}

// startServiceLogged is startService with the program's logger.
func startServiceLogged(t testing.TB, cfgPath string, log *slog.Logger, tune serviceTuning) *running {
	t.Helper()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newService(cfgPath, cfg, logging{log: log}, tune)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.start(ctx)
	r := &running{service: s, cancel: cancel}
	udp, _ := s.dns.Addrs()
	r.addr = udp[0]
	if len(s.apiLns) > 0 {
		r.api = "http://" + s.apiLns[0].Addr().String()
	}
	t.Cleanup(r.stop)
	return r
}

// stop stops everything and closes the db; a second call does nothing.
func (r *running) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.service.stop()
	r.cancel = nil
}

// quietLogger discards the in-process program's log, unless CNS_TEST_LOG
// is set.
func quietLogger() *slog.Logger {
	if os.Getenv("CNS_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// waitFor polls cond every few milliseconds until it holds or the
// deadline passes, and returns how long that took.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}
