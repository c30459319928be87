package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/serve/secondarytest"
)

// mirrorSecondary stands for a secondary on 127.0.0.1 that cns knows of
// through also_notify: once NOTIFYed of a zone, it serves the serial cns
// serves then (asked from 127.0.0.2, so that cns does not count the
// mirror's questions as the peer's SOA queries); before, it does not have
// the zone. It returns the config edit that names it and has cns serve
// where it asks.
func mirrorSecondary(t *testing.T) func(map[string]any) {
	t.Helper()
	port, err := secondarytest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cnsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	client := &dns.Client{Timeout: time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)}}}
	held := map[string]*dns.SOA{} // by zone
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			var q dns.Msg
			if q.Unpack(buf[:n]) != nil || len(q.Question) != 1 {
				continue
			}
			zone := strings.ToLower(q.Question[0].Name)
			r := new(dns.Msg)
			r.SetReply(&q)
			switch {
			case q.Opcode == dns.OpcodeNotify:
				m := new(dns.Msg)
				m.SetQuestion(zone, dns.TypeSOA)
				if a, _, err := client.Exchange(m, cnsAddr); err == nil && len(a.Answer) == 1 {
					held[zone], _ = a.Answer[0].(*dns.SOA)
				}
			case q.Question[0].Qtype == dns.TypeSOA && held[zone] != nil:
				r.Authoritative = true
				r.Answer = []dns.RR{held[zone]}
			default:
				r.Rcode = dns.RcodeRefused
			}
			b, _ := r.Pack()
			c.WriteToUDP(b, from)
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return func(cfg map[string]any) {
		cfg["dns_listen"] = []string{cnsAddr}
		cfg["also_notify"] = []string{c.LocalAddr().String()}
	}
}

// The phantom peer: one `dig axfr` from 127.0.0.1, then commits. cns
// sends nothing to 127.0.0.1:53 (no NOTIFY, no SOA probe, no version
// probe), lists no peer, and cnsadm status shows every zone ACTIVE.
// Loopback is never learned from: a secondary there (triton-prometheus'
// BIND) listens on a port cns cannot know, and monitoring and operators
// transfer by hand.
func TestLoopbackTransferIsNoPeer(t *testing.T) {
	if _, err := exec.LookPath("dig"); err != nil {
		t.Skip("dig is not installed (Debian package dnsutils)")
	}
	// Whatever is sent to 127.0.0.1:53 about this test's zones lands here.
	// The zones have names of their own: other tests on the machine may
	// send there too (an older cns did, after any loopback transfer).
	unique := fmt.Sprintf("phantom-%d-%d.", os.Getpid(), rand.Uint32())
	watch, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53})
	if err != nil {
		t.Fatalf("cannot watch 127.0.0.1:53 for NOTIFYs and probes (the test needs root and a free port 53 on loopback): %v", err)
	}
	defer watch.Close()
	sent := make(chan string, 64)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, from, err := watch.ReadFromUDP(buf)
			if err != nil {
				close(sent)
				return
			}
			var m dns.Msg
			if m.Unpack(buf[:n]) == nil && len(m.Question) == 1 && strings.Contains(strings.ToLower(m.Question[0].Name), unique) {
				sent <- dns.OpcodeToString[m.Opcode] + " " + m.Question[0].String() + " from " + from.String()
			}
		}
	}()

	dir := t.TempDir()
	inv := loadDefaultDC(t)
	invPath := filepath.Join(dir, "inventory.json")
	writeInventory(t, invPath, &inv)
	zone := unique + demoZone
	cfg := testConfig(t, dir, "", func(m map[string]any) {
		m["inventory_file"] = invPath
		m["api_server"] = map[string]any{"listen": "127.0.0.1:0"}
		fz := m["forward_zones"].(map[string]any)
		for name, z := range fz {
			delete(fz, name)
			fz[unique+name] = z
		}
	})
	p := startCNS(t, cfg)
	api := "http://" + p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" }).str("addr")
	p.waitLoaded()

	host, port, _ := net.SplitHostPort(p.addr)
	out, err := exec.Command("dig", "@"+host, "-p", port, "+tcp", zone, "AXFR").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "XFR size") {
		t.Fatalf("dig axfr: %v\n%s", err, out)
	}
	p.waitLogFrom(0, 10*time.Second, func(l logLine) bool {
		return l.str("msg") == "transfer" && strings.HasPrefix(l.str("client"), "127.0.0.1:")
	})

	// Two changes, committed after the transfer.
	for i, alias := range []string{"web0-renamed", "web0-again"} {
		mark := p.mark()
		for j := range inv.VMs {
			if inv.VMs[j].UUID == dcWeb0 {
				inv.VMs[j].Alias = &alias
			}
		}
		writeInventory(t, invPath, &inv)
		p.waitCommitted(mark)
		if !p.hasA(alias+".inst.alice."+zone, "198.51.100.30") {
			t.Fatalf("change %d not served", i)
		}
	}
	// cns probed a transfer's client after 1 s and NOTIFYed at once
	// (min_notify_interval 500 ms); it probes after 2 s now. Nothing is
	// sent to 127.0.0.1:53 within twice that.
	select {
	case what := <-sent:
		t.Fatalf("cns sent %s to 127.0.0.1:53", what)
	case <-time.After(4 * time.Second):
	}

	var peers []json.RawMessage
	apiGet(t, api, "/peers", &peers)
	if len(peers) != 0 {
		t.Errorf("GET /peers lists %s", peers)
	}
	resp, err := http.Get(api + "/peer/127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /peer/127.0.0.1: %s, want 404", resp.Status)
	}
	status, stderr, code := runCNS(t, "adm", "--api", api, "status")
	if code != 0 {
		t.Fatalf("cnsadm status: exit %d: %s", code, stderr)
	}
	zones := 0
	for _, line := range strings.Split(status, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "ZONE" || f[0] == "PEER" {
			continue
		}
		if strings.HasSuffix(f[0], ".com") || strings.HasSuffix(f[0], ".arpa") {
			zones++
			if f[len(f)-1] != "ACTIVE" {
				t.Errorf("cnsadm status: %q", line)
			}
		}
		if strings.Contains(line, "127.0.0.1") || strings.Contains(line, "ERROR") {
			t.Errorf("cnsadm status: %q", line)
		}
	}
	if zones == 0 {
		t.Errorf("cnsadm status shows no zone:\n%s", status)
	}
}
