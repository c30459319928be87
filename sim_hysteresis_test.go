package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/hysteresis"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// Self-removal hysteresis seen from outside: members of a service mark
// themselves down through a feed, and DNS answers show them leaving at
// RFD 1's pace.

// testClock is the updater's clock in the in-process tests: it moves
// only when the test says.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// members counts the A records DNS answers for name.
func (c *sdcCNS) members(name string) int {
	_, ans := c.answer(name, dns.TypeA)
	n := 0
	for _, a := range ans {
		if strings.Contains(a, " A ") {
			n++
		}
	}
	return n
}

// idle waits until neither the feed nor the updater has anything pending:
// what DNS answers then is what cns decided.
func (c *sdcCNS) idle() {
	c.t.Helper()
	waitFor(c.t, "the updater to commit", 10*time.Second, func() bool {
		return c.updater.Pending() == 0 && c.feed.Status().Pending == 0
	})
}

// A service of 6 members marks all down through the SDC changefeed. DNS
// shows n=6: 2 leave at once; then one a minute (n=4, 3, 2); the last one
// 600 s after it went down. The updater's clock is driven by the test;
// Tick is what the Run loop's timer calls at each next check.
func TestSDCHysteresisPace(t *testing.T) {
	sim := startSim(t, sdcsim.Options{})
	start := time.Now().UTC().Truncate(time.Second)
	clock := &testClock{t: start}
	c := startSDCCNSWith(t, filepath.Join(t.TempDir(), "cns.db"), testFeedConfig(t, sim), feeds.Options{Now: clock.Now})
	c.synced(20 * time.Second)

	const service = "pace.svc.alice." + cnsZone
	var vms []string
	for i := range 6 {
		uuid := fmt.Sprintf("5e1f0000-0000-4000-8000-00000000010%d", i)
		vm := newTestVM(uuid, dcAlice, dcCN01, fmt.Sprintf("web-%d", i), fmt.Sprintf("198.51.100.%d", 70+i), dcExternal)
		vm.Tags["triton.cns.services"] = "pace:80"
		if err := sim.CreateVM(vm); err != nil {
			t.Fatal(err)
		}
		vms = append(vms, uuid)
	}
	waitFor(t, "6 members in DNS", 10*time.Second, func() bool { return c.members(service) == 6 })

	for _, vm := range vms {
		if err := sim.SetMetadata(vm, "triton.cns.status", "down"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every member to have asked to leave", 10*time.Second, func() bool {
		v, err := c.updater.Service(dcAlice, "pace")
		if err != nil {
			return false
		}
		for _, m := range v.Members {
			if m.Status == admin.MemberUp {
				return false
			}
		}
		return true
	})
	c.idle()
	if got := c.members(service); got != 4 {
		t.Fatalf("right after the downs DNS lists %d members, want 4 (n=6: 2 may leave)", got)
	}

	for _, step := range []struct {
		sec    int
		listed int
	}{{30, 4}, {59, 4}, {60, 3}, {119, 3}, {120, 2}, {180, 1}, {300, 1}, {599, 1}, {600, 0}} {
		clock.Set(start.Add(time.Duration(step.sec) * time.Second))
		c.updater.Tick()
		waitFor(t, fmt.Sprintf("%d members in DNS at %d s", step.listed, step.sec), 10*time.Second, func() bool {
			return c.members(service) == step.listed
		})
		c.idle()
		if got := c.members(service); got != step.listed {
			t.Errorf("at %d s DNS lists %d members, want %d", step.sec, got, step.listed)
		}
	}
	v, err := c.updater.Service(dcAlice, "pace")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, d := range v.History {
		if d.Action == string(hysteresis.ActionReleased) {
			left = append(left, fmt.Sprintf("%v", d.Time.Sub(start)))
		}
	}
	if got, want := strings.Join(left, " "), "0s 0s 1m0s 2m0s 3m0s 10m0s"; got != want {
		t.Errorf("members left at %s, want %s", got, want)
	}
}

// The real binary with the inventory file feed and the new config keys,
// on the real clock: 3 members go down in one edit of the file; DNS
// first keeps 2, and the service empties only after the last member's
// delay, with no feed event after the edit.
func TestHysteresisBinaryFileFeed(t *testing.T) {
	const (
		window    = 2 * time.Second
		lastDelay = 4 * time.Second
		service   = "hz.svc.alice." + demoZone
	)
	dir := t.TempDir()
	inv := loadDefaultDC(t)
	for i := range 3 {
		vm := newTestVM(fmt.Sprintf("5e1f0000-0000-4000-8000-00000000020%d", i), dcAlice, dcCN01,
			fmt.Sprintf("hz-%d", i), fmt.Sprintf("198.51.100.%d", 80+i), dcExternal)
		vm.Tags["triton.cns.services"] = "hz"
		inv.VMs = append(inv.VMs, vm)
	}
	invPath := filepath.Join(dir, "inventory.json")
	writeInventory(t, invPath, &inv)
	cfg := testConfig(t, dir, "", func(m map[string]any) {
		m["inventory_file"] = invPath
		m["hysteresis_window_ms"] = window.Milliseconds()
		m["hysteresis_last_member_delay_ms"] = lastDelay.Milliseconds()
	})
	p := startCNS(t, cfg)
	p.waitCommitted(0)
	if r := p.query("udp", service, dns.TypeA); len(r.Answer) != 3 {
		t.Fatalf("service answers %d records, want 3", len(r.Answer))
	}

	mark := p.mark()
	for i := range 3 {
		inv.VMs[len(inv.VMs)-3+i].CustomerMetadata["triton.cns.status"] = "down"
	}
	downAt := time.Now()
	writeInventory(t, invPath, &inv)
	var answered int
	waitFor(t, "the first member to leave DNS", 10*time.Second, func() bool {
		answered = len(p.query("udp", service, dns.TypeA).Answer)
		return answered < 3
	})
	if answered != 2 && time.Since(downAt) < window {
		t.Errorf("after the edit the service answers %d records, want 2 (n=3: one may leave)", answered)
	}
	// The rest leave on the updater's timer alone.
	var released []time.Time
	for _, l := range p.waitLogs(mark, 3, 20*time.Second, func(l logLine) bool {
		return l.str("msg") == "hysteresis" && l.str("action") == "released"
	}) {
		ts, err := time.Parse(time.RFC3339Nano, l.str("time"))
		if err != nil {
			t.Fatal(err)
		}
		released = append(released, ts)
	}
	if gap := released[1].Sub(released[0]); gap < window-10*time.Millisecond {
		t.Errorf("the second member left %v after the first, inside the %v window", gap, window)
	}
	if took := released[2].Sub(downAt); took < lastDelay-10*time.Millisecond {
		t.Errorf("the last member left %v after going down, before its %v", took, lastDelay)
	}
	waitFor(t, "the service to empty in DNS", 10*time.Second, func() bool {
		return len(p.query("udp", service, dns.TypeA).Answer) == 0
	})
}

// waitLogs waits for n log lines matching pred after mark and returns
// them.
func (p *proc) waitLogs(from, n int, timeout time.Duration, pred func(logLine) bool) []logLine {
	p.t.Helper()
	deadline := time.After(timeout)
	var out []logLine
	for i := from; ; {
		p.mu.Lock()
		for ; i < len(p.lines) && len(out) < n; i++ {
			if pred(p.lines[i]) {
				out = append(out, p.lines[i])
			}
		}
		grew := p.grew
		p.mu.Unlock()
		if len(out) == n {
			return out
		}
		select {
		case <-grew:
		case <-p.done:
			p.t.Fatalf("cns exited while waiting; log:\n%s", p.log())
		case <-deadline:
			p.t.Fatalf("timed out waiting for %d log lines, got %d; log:\n%s", n, len(out), p.log())
		}
	}
}
