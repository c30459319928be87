package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The guard on mass removals in the binary, with its config keys: the
// inventory file is cut to a quarter of its VMs; cns holds the removals
// (an error line, a PROBLEM in cnsadm status, a table in cnsadm feeds),
// keeps answering the names, and lets them go on cnsadm feeds accept.
func TestRemovalGuardBinary(t *testing.T) {
	dir := t.TempDir()
	inv := loadDefaultDC(t)
	invPath := filepath.Join(dir, "inventory.json")
	writeInventory(t, invPath, &inv)
	cfg := testConfig(t, dir, "", func(m map[string]any) {
		m["inventory_file"] = invPath
		m["api_server"] = map[string]any{"listen": "127.0.0.1:0"}
		m["removal_guard_min_vms"] = 5
		m["removal_guard_percent"] = 40
	})
	p := startCNS(t, cfg)
	api := "http://" + p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" }).str("addr")
	p.waitCommitted(0)
	_, before, err := axfrContent(p.addr, demoZone)
	if err != nil {
		t.Fatal(err)
	}

	mark := p.mark()
	cut := inv
	cut.VMs = inv.VMs[:len(inv.VMs)/4]
	writeInventory(t, invPath, &cut)
	held := p.waitLogFrom(mark, 10*time.Second, func(l logLine) bool { return l.str("msg") != "" && strings.HasPrefix(l.str("msg"), "removals held") })
	if held["level"] != 50.0 || held.str("cause") != "unlisted" || held["min_vms"] != 5.0 || held["percent"] != 40.0 {
		t.Errorf("the hold's log line: %v", held)
	}
	p.waitCommitted(mark)
	if _, during, err := axfrContent(p.addr, demoZone); err != nil || len(during) != len(before) {
		t.Fatalf("while held the zone has %d records, had %d (%v)", len(during), len(before), err)
	}
	out, _, code := runCNS(t, "adm", "--api", api, "status")
	if code != 0 || !strings.HasPrefix(out, "PROBLEM: removals held (unlisted): ") || !strings.Contains(out, "`cnsadm feeds accept unlisted` applies them now") {
		t.Errorf("cnsadm status (%d):\n%s", code, out)
	}
	out, _, code = runCNS(t, "adm", "--api", api, "feeds")
	if code != 0 || !strings.Contains(out, "HELD REMOVALS") || !strings.Contains(out, "over 5 VMs and 40 % of the VMs stored") {
		t.Errorf("cnsadm feeds (%d):\n%s", code, out)
	}

	mark = p.mark()
	out, _, code = runCNS(t, "adm", "--api", api, "feeds", "accept")
	if code != 0 || !strings.HasSuffix(out, " VMs' held removals applied\n") || strings.HasPrefix(out, "0 ") {
		t.Fatalf("cnsadm feeds accept (%d): %s", code, out)
	}
	p.waitLogFrom(mark, 10*time.Second, func(l logLine) bool { return l.str("msg") == "held removals applied" && l.str("action") == "accepted" })
	waitFor(t, "the removals to be served", 10*time.Second, func() bool {
		_, after, err := axfrContent(p.addr, demoZone)
		return err == nil && len(after) < len(before)
	})
	if out, _, _ := runCNS(t, "adm", "--api", api, "status"); strings.Contains(out, "PROBLEM") {
		t.Errorf("cnsadm status after the accept:\n%s", out)
	}
	if r := p.query("udp", demoZone, dns.TypeSOA); r == nil || r.Rcode != dns.RcodeSuccess {
		t.Errorf("the zone does not answer its SOA after the accept: %v", r)
	}
}
