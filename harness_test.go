package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/serve/secondarytest"
)

// The harness of the whole-program tests. Two ways to run cns:
//   - startCNS runs the real binary (built once, lazily, by the first test
//     that needs it; with -race when the tests run with -race) and reads
//     its bunyan log;
//   - startService builds the program in-process through newService, the
//     same wiring `cns serve` uses, for tests that need its parts (the
//     store, the updater, the feed's status).
// Both take a config written by testConfig.

// TestMain removes the binary the tests built, if any, and fails the run
// when a test left a goroutine behind (in-process services and simulators
// have owners that wait for them).
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// update rewrites the golden files the whole-program tests compare with
// (the API's answers, cnsadm's output, the zone exports); review the
// difference before committing it. Every package with goldens has the
// same flag: go test ./PKG -run TEST -update.
var update = flag.Bool("update", false, "rewrite the golden files instead of comparing with them (then review the difference)")

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
	if testing.Short() {
		t.Skip("-short: starts the cns binary")
	}
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
func testConfig(t testing.TB, dir, inventory string, edit func(map[string]any)) string {
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
	t     testing.TB
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
//
// env adds environment variables (KEY=value) to the process's.
func startCNS(t testing.TB, cfg string, env ...string) *proc {
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

// waitLoaded waits until a first load is committed: a commit of VMs with
// nothing left pending. With the SDC feed the networks and compute nodes
// can arrive before the VM listing, and a drain of those alone logs
// "committed" with no VMs and nothing pending, so waitCommitted(0) may
// return before any VM is stored.
func (p *proc) waitLoaded() logLine {
	p.t.Helper()
	return p.waitLogFrom(0, 20*time.Second, func(l logLine) bool {
		vms, _ := l["vms"].(float64)
		return l.str("msg") == "committed" && l["pending"] == 0.0 && vms > 0
	})
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
func runCNS(t testing.TB, args ...string) (string, string, int) {
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

// ---- the API ----

// apiGet fetches an API path and decodes it into v.
func apiGet(t testing.TB, base, path string, v any) {
	t.Helper()
	res, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

func feedHealthy(t testing.TB, base, name string) (healthy bool, reason string) {
	t.Helper()
	var fs admin.Feeds
	apiGet(t, base, "/feeds", &fs)
	for _, f := range fs.Feeds {
		if f.Name == name {
			return f.Healthy, f.Reason
		}
	}
	return true, ""
}

// ---- zone transfers ----

// Zone transfers read the way a secondary reads them, for the crash and
// reliability tests: an AXFR gives a zone's content at one serial, an IXFR
// is applied to an earlier content and must give the current one.

// longRun reports whether the long reliability runs are asked for
// (CNS_LONG=1, see RELIABILITY.md).
func longRun() bool { return os.Getenv("CNS_LONG") != "" }

// zoneContent is a zone at one serial: every record but the SOA, in
// presentation form.
type zoneContent map[string]bool

func rrText(rr dns.RR) string { return strings.ReplaceAll(rr.String(), "\t", " ") }

// transferIn runs one AXFR or IXFR over TCP and returns every record.
func transferIn(addr string, m *dns.Msg) ([]dns.RR, error) {
	tr := &dns.Transfer{DialTimeout: 2 * time.Second, ReadTimeout: 10 * time.Second}
	ch, err := tr.In(m, addr)
	if err != nil {
		return nil, err
	}
	return secondarytest.Records(ch)
}

// axfrContent transfers zone and returns its serial and content.
func axfrContent(addr, zone string) (uint32, zoneContent, error) {
	m := new(dns.Msg)
	m.SetAxfr(dns.Fqdn(zone))
	rrs, err := transferIn(addr, m)
	if err != nil {
		return 0, nil, err
	}
	if len(rrs) < 2 {
		return 0, nil, fmt.Errorf("AXFR of %s: %d records", zone, len(rrs))
	}
	first, ok1 := rrs[0].(*dns.SOA)
	last, ok2 := rrs[len(rrs)-1].(*dns.SOA)
	if !ok1 || !ok2 || first.Serial != last.Serial {
		return 0, nil, fmt.Errorf("AXFR of %s does not start and end with one SOA", zone)
	}
	c := zoneContent{}
	for _, rr := range rrs[1 : len(rrs)-1] {
		if rr.Header().Rrtype == dns.TypeSOA {
			return 0, nil, fmt.Errorf("AXFR of %s has an SOA inside", zone)
		}
		c[rrText(rr)] = true
	}
	return first.Serial, c, nil
}

// ixfrResult is what an IXFR from one serial gave.
type ixfrResult struct {
	to        uint32
	full      bool // the server answered with the whole zone (RFC 1995 §4)
	upToDate  bool // the single SOA
	sequences [][2][]string
}

// ixfrFrom asks for the difference from serial and checks its shape:
// SOA(new), then difference sequences that chain from serial to new, and
// SOA(new); or the whole zone; or a single SOA.
func ixfrFrom(addr, zone string, serial uint32, soa *dns.SOA) (ixfrResult, []dns.RR, error) {
	m := new(dns.Msg)
	m.SetIxfr(dns.Fqdn(zone), serial, soa.Ns, soa.Mbox)
	rrs, err := transferIn(addr, m)
	if err != nil {
		return ixfrResult{}, nil, err
	}
	var res ixfrResult
	if len(rrs) == 0 {
		return res, nil, fmt.Errorf("IXFR from %d: empty", serial)
	}
	head, ok := rrs[0].(*dns.SOA)
	if !ok {
		return res, nil, fmt.Errorf("IXFR from %d: first record is %s", serial, rrText(rrs[0]))
	}
	res.to = head.Serial
	if len(rrs) == 1 {
		res.upToDate = true
		return res, rrs, nil
	}
	if _, ok := rrs[1].(*dns.SOA); !ok {
		res.full = true
		return res, rrs, nil
	}
	if tail, ok := rrs[len(rrs)-1].(*dns.SOA); !ok || tail.Serial != head.Serial {
		return res, nil, fmt.Errorf("IXFR from %d does not end with SOA %d", serial, head.Serial)
	}
	at := serial
	i := 1
	for i < len(rrs)-1 {
		from, ok := rrs[i].(*dns.SOA)
		if !ok || from.Serial != at {
			return res, nil, fmt.Errorf("IXFR from %d: sequence %d starts with %s, want SOA %d", serial, len(res.sequences), rrText(rrs[i]), at)
		}
		var seq [2][]string
		for i++; i < len(rrs)-1 && rrs[i].Header().Rrtype != dns.TypeSOA; i++ {
			seq[0] = append(seq[0], rrText(rrs[i]))
		}
		to, ok := rrs[i].(*dns.SOA)
		if !ok || i == len(rrs)-1 {
			return res, nil, fmt.Errorf("IXFR from %d: sequence %d has no SOA(to)", serial, len(res.sequences))
		}
		for i++; i < len(rrs)-1 && rrs[i].Header().Rrtype != dns.TypeSOA; i++ {
			seq[1] = append(seq[1], rrText(rrs[i]))
		}
		if !db.SerialLess(at, to.Serial) {
			return res, nil, fmt.Errorf("IXFR from %d: sequence %d goes from %d to %d", serial, len(res.sequences), at, to.Serial)
		}
		at = to.Serial
		res.sequences = append(res.sequences, seq)
	}
	if at != head.Serial {
		return res, nil, fmt.Errorf("IXFR from %d ends at %d, not %d", serial, at, head.Serial)
	}
	return res, rrs, nil
}

// apply plays the difference sequences forward on c: every deleted
// record must be there and every added one absent.
func (r ixfrResult) apply(c zoneContent) (zoneContent, error) {
	out := maps.Clone(c)
	for n, seq := range r.sequences {
		for _, d := range seq[0] {
			if !out[d] {
				return nil, fmt.Errorf("sequence %d deletes %s, which is not there", n, d)
			}
			delete(out, d)
		}
		for _, a := range seq[1] {
			if out[a] {
				return nil, fmt.Errorf("sequence %d adds %s, which is there", n, a)
			}
			out[a] = true
		}
	}
	return out, nil
}

// undo plays the sequences backwards from the current content c, giving
// the content at the IXFR's starting serial.
func (r ixfrResult) undo(c zoneContent) (zoneContent, error) {
	out := maps.Clone(c)
	for n := len(r.sequences) - 1; n >= 0; n-- {
		seq := r.sequences[n]
		for _, a := range seq[1] {
			if !out[a] {
				return nil, fmt.Errorf("sequence %d added %s, which is not there to undo", n, a)
			}
			delete(out, a)
		}
		for _, d := range seq[0] {
			if out[d] {
				return nil, fmt.Errorf("sequence %d deleted %s, which is there", n, d)
			}
			out[d] = true
		}
	}
	return out, nil
}

// diffContent describes how got differs from want (at most a few lines).
func diffContent(got, want zoneContent) string {
	var b strings.Builder
	n := 0
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if !got[k] && n < 5 {
			fmt.Fprintf(&b, "\n  missing %s", k)
			n++
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if !want[k] && n < 10 {
			fmt.Fprintf(&b, "\n  extra   %s", k)
			n++
		}
	}
	return b.String()
}
