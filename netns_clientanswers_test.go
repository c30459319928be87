package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// The system resolver as a tenant uses it: a network namespace stands for
// an instance, linked to the host by a veth pair with TEST-NET addresses
// (nothing leaves the machine). Its resolv.conf names cns's client-only
// listener with `search <zone>`, so glibc's getent resolves web.svc in
// the instance owner's scope, and a name outside cns's zones through
// forwarding (to a fake upstream on loopback).
const (
	nsHostAddr = "192.0.2.141" // cns's address on the link
	nsInstAddr = "192.0.2.142" // the instance's
	nsPrefix   = "/30"
)

func TestClientAnswersSystemResolver(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: creates a network namespace")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace (.ci/run runs as root)")
	}
	for _, tool := range []string{"ip", "getent"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	ns := fmt.Sprintf("cnsca%d", os.Getpid())
	hostIf, nsIf := ns+"h", ns+"n"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace here: %v %s", err, out)
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", hostIf).Run()
		exec.Command("ip", "netns", "del", ns).Run()
		os.RemoveAll(filepath.Join("/etc/netns", ns))
	})
	run("ip", "link", "add", hostIf, "type", "veth", "peer", "name", nsIf)
	run("ip", "link", "set", nsIf, "netns", ns)
	run("ip", "addr", "add", nsHostAddr+nsPrefix, "dev", hostIf)
	run("ip", "link", "set", hostIf, "up")
	run("ip", "netns", "exec", ns, "ip", "addr", "add", nsInstAddr+nsPrefix, "dev", nsIf)
	run("ip", "netns", "exec", ns, "ip", "link", "set", nsIf, "up")
	run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
	// The address is usable once duplicate address detection is done
	// (IPv4 has none) and the link is up: cns binds it below.
	if err := os.MkdirAll(filepath.Join("/etc/netns", ns), 0o755); err != nil {
		t.Fatal(err)
	}
	resolv := "nameserver " + nsHostAddr + "\nsearch " + caZone + "\noptions timeout:2 attempts:2\n"
	if err := os.WriteFile(filepath.Join("/etc/netns", ns, "resolv.conf"), []byte(resolv), 0o644); err != nil {
		t.Fatal(err)
	}
	// glibc reads hosts from files first; an empty hosts file keeps the
	// host's entries out of the answers.
	if err := os.WriteFile(filepath.Join("/etc/netns", ns, "hosts"), []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	upstream := fakeUpstream(t, "outside.example.org.", "198.51.100.7")

	inv := dc.Inventory{
		Users: []dc.User{{UUID: caAlice, Login: "alice", TritonCNSEnabled: "true", ApprovedForProvisioning: "true"},
			{UUID: caBob, Login: "bob", TritonCNSEnabled: "true", ApprovedForProvisioning: "true"}},
		Servers:  []dc.Server{{UUID: caCN, Hostname: "cn1", Setup: true, Status: "running"}},
		Networks: []dc.Network{{UUID: caNet, Name: "testnet", Subnet: "192.0.2.0/24"}},
		VMs: []dc.VM{
			caVM("a1000000-0000-4000-8000-000000000001", caAlice, "app-1", nsInstAddr, "web:80"),
			caVM("a1000000-0000-4000-8000-000000000002", caAlice, "app-2", "192.0.2.150", "web:80"),
			caVM("b1000000-0000-4000-8000-000000000001", caBob, "app-1", "192.0.2.160", "web:80"),
		},
	}
	dir := t.TempDir()
	invPath := filepath.Join(dir, "inventory.json")
	writeInventory(t, invPath, &inv)
	cfg := testConfig(t, dir, "", func(m map[string]any) {
		m["inventory_file"] = invPath
		m["forward_zones"] = map[string]any{caZone: map[string]any{"networks": []string{"*"}}}
		m["client_answers"] = map[string]any{"networks": []string{caNet}, "listen": []string{nsHostAddr + ":53"}}
		m["forwarding"] = map[string]any{"clients": []string{nsHostAddr + nsPrefix}, "upstreams": []string{upstream}}
	})
	p := startCNS(t, cfg)
	p.waitCommitted(0)

	getent := func(name string) []string {
		t.Helper()
		start := time.Now()
		defer func() { t.Logf("getent ahostsv4 %s: %v", name, time.Since(start)) }()
		out, err := exec.Command("ip", "netns", "exec", ns, "getent", "ahostsv4", name).CombinedOutput()
		if err != nil {
			t.Fatalf("getent ahostsv4 %s in the namespace: %v\n%s", name, err, out)
		}
		var addrs []string
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 && !slices.Contains(addrs, f[0]) {
				addrs = append(addrs, f[0])
			}
		}
		slices.Sort(addrs)
		return addrs
	}
	for name, want := range map[string][]string{
		"web.svc":             {nsInstAddr, "192.0.2.150"},
		"app-2.inst":          {"192.0.2.150"},
		"self.inst":           {nsInstAddr},
		"outside.example.org": {"198.51.100.7"},
	} {
		if got := getent(name); !slices.Equal(got, want) {
			t.Errorf("getent %s: %v, want %v", name, got, want)
		}
	}
}

// fakeUpstream answers name with one A record and NXDOMAIN for the rest,
// on loopback; it returns its address.
func fakeUpstream(t *testing.T, name, a string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		if q := r.Question[0]; strings.EqualFold(q.Name, name) && q.Qtype == dns.TypeA {
			rr, _ := dns.NewRR(name + " 60 IN A " + a)
			m.Answer = append(m.Answer, rr)
		} else if !strings.EqualFold(q.Name, name) {
			m.Rcode = dns.RcodeNameError
		}
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("fake upstream did not start")
	}
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}
