package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/serve/secondarytest"
)

// The terminal UI end to end: the real binary's `cns tui` in a real
// terminal (tmux), against the real binary's `cns serve` on the demo data
// center, driven with send-keys and read with capture-pane.
//
// CNS_TUI_CAPTURES=DIR keeps each asserted screen in DIR (for the
// manual's text captures, docs/operating.md).

// tmuxTerm is a detached tmux session of a fixed size on a server of its
// own.
type tmuxTerm struct {
	t      *testing.T
	socket string
	name   string
}

func newTmux(t *testing.T, width, height int, command string) *tmuxTerm {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (Debian package tmux)")
	}
	tm := &tmuxTerm{t: t, socket: fmt.Sprintf("cns-e2e-%d", os.Getpid()), name: "tui"}
	tm.run("new-session", "-d", "-s", tm.name, "-x", fmt.Sprint(width), "-y", fmt.Sprint(height), command)
	t.Cleanup(func() {
		exec.Command("tmux", "-L", tm.socket, "kill-session", "-t", tm.name).Run()
		exec.Command("tmux", "-L", tm.socket, "kill-server").Run()
	})
	return tm
}

func (tm *tmuxTerm) run(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tm.socket}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// keys sends tmux key names (Enter, Escape, Down) or single characters.
func (tm *tmuxTerm) keys(keys ...string) {
	tm.t.Helper()
	for _, k := range keys {
		tm.run("send-keys", "-t", tm.name, k)
	}
}

// typeText types text literally.
func (tm *tmuxTerm) typeText(text string) {
	tm.t.Helper()
	tm.run("send-keys", "-t", tm.name, "-l", text)
}

func (tm *tmuxTerm) screen() string {
	tm.t.Helper()
	return tm.run("capture-pane", "-p", "-t", tm.name)
}

// waitScreen polls the screen until every pattern matches, and returns
// it.
func (tm *tmuxTerm) waitScreen(what string, patterns ...string) string {
	tm.t.Helper()
	var res []*regexp.Regexp
	for _, p := range patterns {
		res = append(res, regexp.MustCompile(p))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := tm.screen()
		ok := true
		for _, re := range res {
			ok = ok && re.MatchString(s)
		}
		if ok {
			if dir := os.Getenv("CNS_TUI_CAPTURES"); dir != "" {
				os.MkdirAll(dir, 0o755)
				os.WriteFile(filepath.Join(dir, what+".txt"), []byte(s), 0o644)
			}
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("%s: the screen never matched %q:\n%s", what, patterns, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// screenLine returns the first line of screen matching re.
func screenLine(screen string, re string) string {
	return regexp.MustCompile(`(?m)^.*` + re + `.*$`).FindString(screen)
}

func TestTUIEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (Debian package tmux)")
	}
	// The demo data center plus a service of three members, which will
	// mark themselves down: with a 10-minute window and a 20-minute
	// last-member delay, one leaves and two wait, counting down.
	dir := t.TempDir()
	inv := loadDefaultDC(t)
	for i := range 3 {
		vm := newTestVM(fmt.Sprintf("5e1f0000-0000-4000-8000-00000000030%d", i), dcAlice, dcCN01,
			fmt.Sprintf("hz-%d", i), fmt.Sprintf("198.51.100.%d", 90+i), dcExternal)
		vm.Tags["triton.cns.services"] = "hz"
		inv.VMs = append(inv.VMs, vm)
	}
	invPath := filepath.Join(dir, "inventory.json")
	writeInventory(t, invPath, &inv)
	deadPort, err := secondarytest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, dir, "", func(m map[string]any) {
		m["inventory_file"] = invPath
		m["api_server"] = map[string]any{"listen": "127.0.0.1:0"}
		m["hysteresis_window_ms"] = (10 * time.Minute).Milliseconds()
		m["hysteresis_last_member_delay_ms"] = (20 * time.Minute).Milliseconds()
		// A secondary on 127.0.0.1 (named, or its transfer would not make
		// it a peer) that stays behind: nothing answers at its port.
		m["forward_zones"].(map[string]any)[demoZone].(map[string]any)["also_notify"] = []string{fmt.Sprintf("127.0.0.1:%d", deadPort)}
	})
	p := startCNS(t, cfg)
	api := "http://" + p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" }).str("addr")
	p.waitCommitted(0)

	// A secondary transfers the zone, then the zone moves on without it:
	// the members go down (a new serial); the peer stays behind.
	m := new(dns.Msg)
	m.SetAxfr(demoZone + ".")
	ch, err := new(dns.Transfer).In(m, p.addr)
	if err != nil {
		t.Fatal(err)
	}
	for env := range ch {
		if env.Error != nil {
			t.Fatal(env.Error)
		}
	}
	mark := p.mark()
	for i := range 3 {
		inv.VMs[len(inv.VMs)-3+i].CustomerMetadata["triton.cns.status"] = "down"
	}
	writeInventory(t, invPath, &inv)
	p.waitLogFrom(mark, 20*time.Second, func(l logLine) bool {
		return l.str("msg") == "hysteresis" && l.str("action") == "released"
	})
	p.waitCommitted(mark)

	term := newTmux(t, 100, 30, cnsBin(t)+" tui --api "+api)

	// Zones: the list with serials, last change, counts and journal.
	s := term.waitScreen("zones", `\[1 Zones\]`, `us-west-1\.cns\.example\.com\s+\d{10}\s`, `us-west-1\.int\.example\.com`,
		`100\.51\.198\.in-addr\.arpa`, `JOURNAL`)
	if !strings.Contains(s, "updated") {
		t.Errorf("no update time on the status line:\n%s", s)
	}

	// Peers: 127.0.0.1 is behind the zone, in serials and in time: the
	// lag grows from the commit it missed, so it reaches 1 s and more
	// (a 0 s lag would be a peer said behind but not late).
	term.keys("2")
	s = term.waitScreen("peers", `\[2 Peers\]`, `127\.0\.0\.1\s+us-west-1\.cns\.example\.com\s+\d{10}\s+-[1-9]\d* / [1-9]\d*s`)
	t.Logf("peer: %s", screenLine(s, `127\.0\.0\.1`))

	// Services: hz, found by a member's alias, has members pending
	// removal, each with a countdown that ticks on its own; its owner by
	// login, its members by alias with their UUIDs.
	term.keys("3", "/")
	term.typeText("hz-1")
	term.keys("Enter")
	s = term.waitScreen("services", `\[3 Services\]`, `~hz\s+alice\s`, `pending\s+\d+s ago\s+in \d+m\d\ds`,
		`(?m)^  hz-0\s+5e1f0000-0000-4000-8000-000000000300\s+left\s`, `(?m)^ ~hz-1\s+5e1f0000-0000-4000-8000-000000000301\s+pending\s`)
	first := regexp.MustCompile(`pending\s+\d+s ago\s+(in \d+m\d\ds)`).FindStringSubmatch(s)[1]
	s = term.waitScreen("services-ticked", `pending\s+\d+s ago\s+in \d+m\d\ds`)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if now := regexp.MustCompile(`pending\s+\d+s ago\s+(in \d+m\d\ds)`).FindStringSubmatch(s)[1]; now != first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the countdown stayed at %q:\n%s", first, s)
		}
		time.Sleep(50 * time.Millisecond)
		s = term.screen()
	}
	if !strings.Contains(s, "budget 0 of 1 left") {
		t.Errorf("no spent budget on the services screen:\n%s", s)
	}

	// web, found by a member's UUID: web2 was down before cns first saw
	// it, and says so.
	// (A key sent right after Escape can arrive with it, read as
	// alt+key: each Escape is waited for.)
	term.keys("Escape")
	term.waitScreen("services-all", `\A[^\n]*\n  SERVICE `) // no filter line
	term.keys("/")
	term.typeText("f47889c3")
	term.keys("Enter")
	term.waitScreen("services-web", `(?m)^> web\s+alice\s`, `web2\s+f47889c3-2578-42e6-a1e6-7d0ef46e7fd6\s+left\s+first seen \d+[smh] ago`)
	term.keys("Enter")
	firstSeen := `(?m)^        down since before cns saw it \(first seen down at \d\d:\d\d:\d\d, \d+ (sec|min)s? ago\)$`
	term.waitScreen("service", `Service web of alice`, `owner:\s+alice \(6c96670e-4204-4bc0-bd64-b4c576c09876\)`,
		`(?m)^  web2  f47889c3-2578-42e6-a1e6-7d0ef46e7fd6  left$`, firstSeen)
	term.keys("Escape")
	term.waitScreen("services-web-again", `(?m)^/ f47889c3`, `(?m)^> web\s+alice\s`)

	// VMs: search carol's VM, open it: not listed, and why.
	term.keys("4", "/")
	term.typeText("carol-web")
	term.keys("Enter")
	term.waitScreen("vms", `\[4 VMs\]`, `1 VM matching "carol-web"`)
	term.keys("Enter")
	term.waitScreen("vm", `VM carol-web \(e76f7f8b-fb63-4c58-adf4-5b275a0d5aa6\)`, `listed:\s+nothing`,
		`user_en_flag\s+the owner has not enabled CNS`)

	// Feeds, and help.
	term.keys("5")
	term.waitScreen("feeds", `\[5 Feeds\]`, `inventory_file\s+healthy`)
	term.keys("?")
	term.waitScreen("help", `Marks`, `stale`)

	// In 80 columns, the service's detail still reads whole.
	term.keys("?", "3", "Enter")
	term.run("resize-window", "-t", term.name, "-x", "80", "-y", "24")
	term.waitScreen("service-80", `(?m)^ 1 Zones .* cns$`, `Service web of alice`, firstSeen)
	term.keys("q")
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := exec.Command("tmux", "-L", term.socket, "has-session", "-t", term.name).CombinedOutput()
		if err != nil {
			break // the UI quit and the session with it
		}
		if time.Now().After(deadline) {
			t.Fatalf("q did not quit: %s\n%s", out, term.screen())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The API goes away under the UI: a banner, then recovery by itself.
func TestTUIReconnects(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (Debian package tmux)")
	}
	dir := t.TempDir()
	cfg := testConfig(t, dir, "testdata/inventory.json", func(c map[string]any) {
		c["api_server"] = map[string]any{"listen": "127.0.0.1:0"}
	})
	p := startCNS(t, cfg)
	addr := p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" }).str("addr")
	p.waitCommitted(0)
	term := newTmux(t, 80, 24, cnsBin(t)+" tui --api http://"+addr)
	term.waitScreen("reconnect-up", `us-west-1\.cns\.example\.com`)

	p.stop(syscall.SIGKILL)
	term.waitScreen("reconnect-banner", `! API unreachable since \d\d:\d\d:\d\d`, `us-west-1\.cns\.example\.com`)

	// The same server comes back on the same port.
	cfg = testConfig(t, dir, "testdata/inventory.json", func(c map[string]any) {
		c["api_server"] = map[string]any{"listen": addr}
	})
	p = startCNS(t, cfg)
	p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" })
	for deadline := time.Now().Add(30 * time.Second); ; {
		s := term.screen()
		if !strings.Contains(s, "unreachable") && strings.Contains(s, "us-west-1.cns.example.com") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the banner stayed:\n%s", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
