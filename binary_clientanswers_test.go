package main

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// Client-scoped answers through the whole program: the file feed's
// instances of two owners have loopback addresses on the client network,
// so a test can ask from each of them.
const (
	caZone   = "us-west-1.int.example.com"
	caNet    = "c1c1c1c1-0000-4000-8000-0000000000c1"
	caCN     = "44454c4c-3300-1034-8037-b7c04f4e3299"
	caAlice  = "a11ce000-0000-4000-8000-0000000000a1"
	caBob    = "b0b00000-0000-4000-8000-0000000000b0"
	caSrcBob = "127.0.0.22" // bob's db-1, moved to alice by the test
)

func caVM(uuid, owner, alias, ip, services string) dc.VM {
	vm := dc.VM{UUID: uuid, Alias: &alias, OwnerUUID: owner, ServerUUID: caCN, State: "running", Brand: "joyent",
		NICs: []dc.NIC{{Interface: "net0", IP: ip, IPs: []string{ip + "/8"}, NetworkUUID: caNet, NICTag: "external", Primary: true}},
		Tags: map[string]any{}, CustomerMetadata: map[string]any{}}
	if services != "" {
		vm.Tags["triton.cns.services"] = services
	}
	return vm
}

func caInventory(bobsDBOwner string) dc.Inventory {
	return dc.Inventory{
		Users: []dc.User{{UUID: caAlice, Login: "alice", TritonCNSEnabled: "true", ApprovedForProvisioning: "true"},
			{UUID: caBob, Login: "bob", TritonCNSEnabled: "true", ApprovedForProvisioning: "true"}},
		Servers:  []dc.Server{{UUID: caCN, Hostname: "cn1", Setup: true, Status: "running"}},
		Networks: []dc.Network{{UUID: caNet, Name: "loopback", Subnet: "127.0.0.0/8"}},
		VMs: []dc.VM{
			caVM("a1000000-0000-4000-8000-000000000001", caAlice, "web-1", "127.0.0.11", "web:80"),
			caVM("a1000000-0000-4000-8000-000000000002", caAlice, "db-1", "127.0.0.12", ""),
			caVM("b1000000-0000-4000-8000-000000000001", caBob, "web-1", "127.0.0.21", "web:80"),
			caVM("b1000000-0000-4000-8000-000000000002", bobsDBOwner, "db-1", caSrcBob, ""),
			caVM("a1000000-0000-4000-8000-000000000003", caAlice, "dup-a", "127.0.0.31", ""),
			caVM("b1000000-0000-4000-8000-000000000003", caBob, "dup-b", "127.0.0.31", ""),
		},
	}
}

// askFrom sends one query to server from the source address src.
func askFrom(t *testing.T, src, server, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(1232, false)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
	r, _, err := c.Exchange(m, server)
	if err != nil {
		t.Fatalf("%s from %s: %v", name, src, err)
	}
	return r
}

// answerData is the data of each answer record, sorted.
func answerData(r *dns.Msg) string {
	var out []string
	for _, rr := range r.Answer {
		f := strings.Fields(rr.String())
		out = append(out, strings.Join(f[4:], " "))
	}
	slices.Sort(out)
	return dns.RcodeToString[r.Rcode] + " " + strings.Join(out, ", ")
}

func edeText(r *dns.Msg) string {
	if opt := r.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				return e.ExtraText
			}
		}
	}
	return ""
}

func TestClientAnswersEndToEnd(t *testing.T) {
	dir := t.TempDir()
	invPath := filepath.Join(dir, "inventory.json")
	inv := caInventory(caBob)
	writeInventory(t, invPath, &inv)
	cfg := testConfig(t, dir, "", func(m map[string]any) {
		m["inventory_file"] = invPath
		m["forward_zones"] = map[string]any{caZone: map[string]any{"networks": []string{"*"}}}
		m["client_answers"] = map[string]any{"networks": []string{caNet}}
	})
	p := startCNS(t, cfg)
	p.waitCommitted(0)

	z := "." + caZone
	for _, tc := range []struct{ src, name, want string }{
		{"127.0.0.11", "web.svc" + z, "NOERROR 127.0.0.11"},
		{"127.0.0.12", "web.svc" + z, "NOERROR 127.0.0.11"},
		{"127.0.0.21", "web.svc" + z, "NOERROR 127.0.0.21"},
		{"127.0.0.11", "db-1.inst" + z, "NOERROR 127.0.0.12"},
		{"127.0.0.21", "db-1.inst" + z, "NOERROR " + caSrcBob},
		{"127.0.0.12", "self.inst" + z, "NOERROR 127.0.0.12"},
		{caSrcBob, "self.inst" + z, "NOERROR " + caSrcBob},
		{"127.0.0.41", "web.svc" + z, "NXDOMAIN "},
		{"127.0.0.31", "web.svc" + z, "NXDOMAIN "},
		{"127.0.0.41", "web.svc.bob" + z, "NOERROR 127.0.0.21"}, // owner-qualified: as today
	} {
		if got := answerData(askFrom(t, tc.src, p.addr, tc.name, dns.TypeA)); got != tc.want {
			t.Errorf("%s from %s: %q, want %q", tc.name, tc.src, got, tc.want)
		}
	}
	if got := edeText(askFrom(t, "127.0.0.41", p.addr, "web.svc"+z, dns.TypeA)); !strings.Contains(got, "identifies no instance") {
		t.Errorf("unknown source: EDE %q", got)
	}
	if got := edeText(askFrom(t, "127.0.0.31", p.addr, "web.svc"+z, dns.TypeA)); !strings.Contains(got, "several instances") {
		t.Errorf("ambiguous source: EDE %q", got)
	}
	srv := askFrom(t, "127.0.0.21", p.addr, "web.svc"+z, dns.TypeSRV)
	if len(srv.Answer) != 1 || len(srv.Extra) < 2 || !strings.Contains(srv.Answer[0].String(), ".inst.bob"+z) {
		t.Errorf("SRV from bob's web-1: %v + %v", srv.Answer, srv.Extra)
	}

	// AXFR holds no owner-less name.
	m := new(dns.Msg)
	m.SetQuestion(caZone+".", dns.TypeAXFR)
	env, err := (&dns.Transfer{}).In(m, p.addr)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for e := range env {
		if e.Error != nil {
			t.Fatal(e.Error)
		}
		for _, rr := range e.RR {
			n++
			name := rr.Header().Name
			if strings.HasSuffix(name, ".svc"+z+".") || strings.HasSuffix(name, ".inst"+z+".") {
				t.Errorf("AXFR holds owner-less name %s", name)
			}
		}
	}
	if n < 20 {
		t.Errorf("AXFR: %d records", n)
	}

	// Bob's db-1 becomes alice's: its answers switch with the commit.
	mark := p.mark()
	inv = caInventory(caAlice)
	writeInventory(t, invPath, &inv)
	p.waitCommitted(mark)
	for _, tc := range []struct{ name, want string }{
		{"web.svc" + z, "NOERROR 127.0.0.11"},
		{"self.inst" + z, "NOERROR " + caSrcBob},
		{"db-1.inst" + z, fmt.Sprintf("NOERROR 127.0.0.12, %s", caSrcBob)},
	} {
		if got := answerData(askFrom(t, caSrcBob, p.addr, tc.name, dns.TypeA)); got != tc.want {
			t.Errorf("after the move, %s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
