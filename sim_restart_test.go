package main

import (
	"encoding/json"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// A SAPI change always takes effect: config-agent rewrites the file and
// refreshes cns (SIGHUP). Here the data center's services move to other
// ports (vmapi_opts and the rest: settings only a start applies); after
// the SIGHUP the binary restarts itself in the same process, keeps its db
// (the journal still answers an IXFR from the serial before) and follows
// the services at their new address.
func TestReloadRestartsForStartOnlySettings(t *testing.T) {
	dir := t.TempDir()
	newSim := func(edit func(*dc.Inventory)) *sdcsim.Sim {
		t.Helper()
		inv := loadDefaultDC(t)
		if edit != nil {
			edit(&inv)
		}
		sim, err := sdcsim.New(inv, sdcsim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return sim
	}
	before := newSim(nil)
	beforeClosed := false
	t.Cleanup(func() {
		if !beforeClosed {
			before.Close()
		}
	})
	// Where the services moved, web0 has another alias: what cns serves
	// then can only come from there.
	after := newSim(func(inv *dc.Inventory) {
		for i := range inv.VMs {
			if inv.VMs[i].UUID == dcWeb0 {
				alias := "web0-moved"
				inv.VMs[i].Alias = &alias
			}
		}
	})
	t.Cleanup(func() { after.Close() })

	pointAt := func(sim *sdcsim.Sim) func(map[string]any) {
		return func(c map[string]any) {
			delete(c, "inventory_file")
			for k, v := range sim.Config() {
				c[k] = v
			}
		}
	}
	cfgPath := testConfig(t, dir, "", pointAt(before))
	p := startCNS(t, cfgPath)
	pid := p.cmd.Process.Pid
	p.waitLog(20*time.Second, func(l logLine) bool { return l.str("msg") == "full listing applied" })
	waitFor(t, "web0 served", 10*time.Second, func() bool { return p.hasA("web0.inst.alice."+cnsZone, "198.51.100.30") })
	soa := p.query("udp", cnsZone, dns.TypeSOA).Answer[0].(*dns.SOA)

	// SAPI's new addresses, as config-agent writes them; the old ones stop
	// answering.
	testConfig(t, dir, "", pointAt(after))
	if err := before.Close(); err != nil {
		t.Fatal(err)
	}
	beforeClosed = true
	mark := p.mark()
	p.cmd.Process.Signal(syscall.SIGHUP)
	l := p.waitLogFrom(mark, 10*time.Second, func(l logLine) bool { return l.str("msg") == "restarting" })
	var settings []string
	if b, _ := json.Marshal(l["settings"]); json.Unmarshal(b, &settings) != nil || !slices.Contains(settings, "vmapi_opts") {
		t.Errorf("restart logs the settings %v, want vmapi_opts among them", l["settings"])
	}
	listening := p.waitLogFrom(mark, 20*time.Second, func(l logLine) bool { return l.str("msg") == "listening" })
	if listening["pid"] != float64(pid) {
		t.Errorf("cns restarted as pid %v, want the same process (%d): SMF's contract and systemd follow it", listening["pid"], pid)
	}
	p.addr = listening.str("udp") // dns_listen is an ephemeral port

	// The services at their new address answer.
	waitFor(t, "web0's alias from where the services moved", 20*time.Second, func() bool {
		return p.hasA("web0-moved.inst.alice."+cnsZone, "198.51.100.30")
	})
	// The db was kept: the journal leads from the serial before the restart.
	res, _, err := ixfrFrom(p.addr, cnsZone, soa.Serial, soa)
	if err != nil || res.full || res.upToDate || len(res.sequences) == 0 {
		t.Errorf("IXFR from %d after the restart: %+v %v, want the changes since", soa.Serial, res, err)
	}

	// The file says nothing new now: a reload, no restart.
	mark = p.mark()
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitLogFrom(mark, 10*time.Second, func(l logLine) bool { return l.str("msg") == "configuration reloaded" })
	p.mu.Lock()
	for _, l := range p.lines[mark:] {
		if l.str("msg") == "restarting" {
			t.Errorf("a reload of an unchanged file restarted cns: %v", l)
		}
	}
	p.mu.Unlock()
}
