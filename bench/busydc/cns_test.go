package busydc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
	"github.com/tritondatacenter/cns/serve/secondarytest"
)

// cnsProc is `cns serve` running as its own process (in the CPU quota
// when CNS_LAUNCHER is bench/capped/taskset), fed by the simulator.
type cnsProc struct {
	cmd         *exec.Cmd
	dns         netip.AddrPort
	api         string
	notifyPorts []int // the secondaries' ports, told to cns as also_notify
	log         string
	done        chan struct{} // closed when the process has exited
}

func freePort(b *testing.B) int {
	p, err := secondarytest.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func startCNS(b *testing.B, k knobs, sim *sdcsim.Sim, secondaries int) *cnsProc {
	c := &cnsProc{dns: addrPort(fmt.Sprintf("127.0.0.1:%d", freePort(b)))}
	c.api = fmt.Sprintf("127.0.0.1:%d", freePort(b))
	var notify []string
	for range secondaries {
		p := freePort(b)
		c.notifyPorts = append(c.notifyPorts, p)
		notify = append(notify, fmt.Sprintf("127.0.0.1:%d", p))
	}
	cfg := map[string]any{
		"my_name":    "cns.busydc.example",
		"hostmaster": "hostmaster@busydc.example",
		// The secondaries follow the forward zone only: NOTIFY it alone
		// (a global also_notify would send them every reverse zone's too).
		"forward_zones":  map[string]any{zone: map[string]any{"networks": []string{sdcsim.ExternalNetwork}, "also_notify": notify}},
		"reverse_zones":  map[string]any{},
		"allow_transfer": []string{"127.0.0.1"},
		"use_login":      true,
		"use_alias":      true,
		// No periodic full listing during the measurement.
		"full_poll_interval": 3_600_000,
		"db_path":            filepath.Join(k.out, "cns.db"),
		"dns_listen":         []string{c.dns.String()},
		"api_server":         map[string]any{"listen": c.api},
		"log_level":          "info",
	}
	for key, v := range sim.Config() {
		cfg[key] = v
	}
	// cns's defaults unless asked: a 25 ms batch window, NOTIFY at most
	// every 500 ms per peer and zone, a reverse zone per /24.
	if k.batchWindow != "" {
		cfg["batch_window_ms"], _ = strconv.Atoi(k.batchWindow)
	}
	if k.reversePrefix != "" {
		cfg["reverse_v4_prefix"], _ = strconv.Atoi(k.reversePrefix)
	}
	if k.minNotify != "" {
		cfg["min_notify_interval"], _ = strconv.Atoi(k.minNotify)
	}
	os.Remove(filepath.Join(k.out, "cns.db"))
	raw, _ := json.MarshalIndent(cfg, "", "  ")
	cfgPath := filepath.Join(k.out, "cns.json")
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		b.Fatal(err)
	}
	args := []string{k.cnsBin, "serve", "-c", cfgPath}
	if k.launcher != "" {
		args = append([]string{k.launcher, "-c", k.cnsCPU}, args...)
	}
	c.log = filepath.Join(k.out, "cns.log")
	lf, err := os.Create(c.log)
	if err != nil {
		b.Fatal(err)
	}
	defer lf.Close()
	c.cmd = exec.Command(args[0], args[1:]...)
	c.cmd.Stdout, c.cmd.Stderr = lf, lf
	if err := c.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c.done = make(chan struct{})
	go func() { c.cmd.Wait(); close(c.done) }()
	b.Cleanup(func() {
		c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			c.cmd.Process.Kill()
		}
	})
	b.Logf("cns: %s (log %s)", strings.Join(args, " "), c.log)
	return c
}

// ask sends one question over UDP.
func ask(server string, name string, qtype uint16, timeout time.Duration) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	cl := &dns.Client{Timeout: timeout}
	r, _, err := cl.Exchange(m, server)
	return r, err
}

// waitSynced waits until cns answers for the data center's last VM and
// has nothing pending.
func (c *cnsProc) waitSynced(b *testing.B, name, ip string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := c.exited(); err != nil {
			b.Fatalf("cns exited: %v\n%s", err, tailFile(c.log, 30))
		}
		if r, err := ask(c.dns.String(), name, dns.TypeA, time.Second); err == nil && hasA(ip, true)(r) {
			if m, err := c.metrics(); err == nil && m["cns_pending_vms"] == 0 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond) // polling cns's observable state
	}
	b.Fatalf("cns did not answer for %s within %v\n%s", name, timeout, tailFile(c.log, 30))
}

func (c *cnsProc) exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("%v", c.cmd.ProcessState)
	default:
		return nil
	}
}

// serial is the zone's SOA serial on cns.
func (c *cnsProc) serial(b *testing.B) uint32 {
	r, err := ask(c.dns.String(), zone+".", dns.TypeSOA, time.Second)
	if err != nil || len(r.Answer) == 0 {
		b.Fatalf("SOA %s on cns: %v", zone, err)
	}
	return r.Answer[0].(*dns.SOA).Serial
}

// metrics reads the Prometheus samples without labels, and the
// histograms' buckets (by `name_bucket{le="…"}`).
func (c *cnsProc) metrics() (map[string]float64, error) {
	res, err := http.Get("http://" + c.api + "/metrics")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: HTTP %d", res.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.Contains(line, "{") && !strings.Contains(line, `_bucket{le="`) {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	io.Copy(io.Discard, res.Body)
	return out, sc.Err()
}

// cpuSeconds is cns's user+system CPU time so far.
func (c *cnsProc) cpuSeconds() float64 { return procCPU(c.cmd.Process.Pid) }

func procCPU(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// groupPIDs lists the processes of process group pgid (a secondary and
// the children it forks).
func groupPIDs(pgid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(raw)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}

func runCmd(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

func tailFile(path string, lines int) string {
	raw, _ := os.ReadFile(path)
	l := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// cgroupStat reads cpu.stat of cns's cgroup v1 cpu group (nr_periods,
// nr_throttled, throttled_time); nil when cns runs without a quota.
func cgroupStat(dir string) map[string]float64 {
	if dir == "" {
		return nil
	}
	raw, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			out[k], _ = strconv.ParseFloat(v, 64)
		}
	}
	return out
}

// profile writes a CPU profile of cns taken for d after a wait of after.
func (c *cnsProc) profile(b *testing.B, path string, after, d time.Duration) {
	time.Sleep(after) // the profile's place in the phase
	res, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", c.api, int(d.Seconds())))
	if err != nil {
		b.Logf("profile: %v", err)
		return
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode == http.StatusOK {
		err = os.WriteFile(path, raw, 0o644)
	}
	if err != nil || res.StatusCode != http.StatusOK {
		b.Logf("profile: HTTP %d %v", res.StatusCode, err)
		return
	}
	b.Logf("cns CPU profile of %v of churn: %s", d, path)
}
