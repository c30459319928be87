package serve

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/serve/policy"
)

// Two owners' instances, with the records the record builder gives them
// and client addresses on loopback that a test can send from.
const (
	ownerA = "0a000000-0000-4000-8000-00000000000a"
	ownerB = "0b000000-0000-4000-8000-00000000000b"
	vmA1   = "a1000000-0000-4000-8000-0000000000a1"
	vmA2   = "a2000000-0000-4000-8000-0000000000a2"
	vmA3   = "a3000000-0000-4000-8000-0000000000a3"
	vmS1   = "5e000000-0000-4000-8000-00000000005e"
	vmB1   = "b1000000-0000-4000-8000-0000000000b1"
	// otherZone holds a name of owner A's but none of A1's.
	otherZone = "other.example.com"
	srcA1     = "127.0.0.11"
	srcA2     = "127.0.0.12"
	srcB1     = "127.0.0.21"
	srcBoth   = "127.0.0.31" // claimed by A1 and B1
	srcNone   = "127.0.0.41"
	// srcFabric is B1's address on a fabric (127.0.0.48/28); cns's own
	// address there is fabricListen.
	srcFabric    = "127.0.0.51"
	fabricListen = "127.0.0.50"
)

// clientVM is one instance: its records as the builder makes them
// (uuid and alias names, the web service with SRV and gRPC forms) and its
// client addresses.
func clientVM(t testing.TB, uuid, owner, alias, ip string, addrs ...db.ClientAddr) db.VMChange {
	rec := func(s string) db.Record { return db.Record{Zone: zoneName, RR: mustRR(t, s), Pref: 1} }
	own := func(s string) string { return s + "." + owner + "." + zoneName + "." }
	inst := own(uuid + ".inst")
	return db.VMChange{UUID: uuid, Client: &db.Client{Owner: owner, Addrs: addrs, Zones: []string{zoneName}}, Records: []db.Record{
		rec(inst + " 30 IN A " + ip),
		rec(inst + ` 30 IN TXT "` + uuid + `"`),
		rec(own(alias+".inst") + " 30 IN A " + ip),
		rec(own(alias+".inst") + ` 30 IN TXT "` + uuid + `"`),
		rec(own("web.svc") + " 30 IN A " + ip),
		rec(own("web.svc") + " 30 IN SRV 0 10 80 " + inst),
		rec(own("_grpclb._tcp.web.svc") + " 30 IN SRV 0 0 8443 " + own("web.svc")),
		rec(own("_grpc_config.web.svc") + ` 30 IN TXT "grpc_config=[]"`),
	}}
}

func addr(s string) db.ClientAddr { return db.ClientAddr{Addr: netip.MustParseAddr(s)} }

func clientStore(t testing.TB) *db.DB {
	t.Helper()
	d := emptyStore(t)
	fabric := db.ClientAddr{Addr: netip.MustParseAddr(srcFabric), Fabric: netip.MustParsePrefix("127.0.0.48/28")}
	_, err := d.Commit(&db.ChangeSet{
		Zones: &db.ZoneConfig{Forward: map[string]db.Apex{zoneName: testApex(), otherZone: testApex()}, Reverse: testApex()},
		VMs: []db.VMChange{
			// An owner whose login is "svc": svc.<zone> exists, and so do
			// names shaped like owner-less ones.
			{UUID: vmS1, Records: []db.Record{{Zone: zoneName, RR: mustRR(t, "x.inst.svc."+zoneName+". 30 IN A 10.9.9.9"), Pref: 1}}},
			// Owner A's web service in the other zone, where A1 has no names.
			{UUID: vmA3, Records: []db.Record{{Zone: otherZone, RR: mustRR(t, "web.svc."+ownerA+"."+otherZone+". 30 IN A 10.3.0.3"), Pref: 1}}},
			clientVM(t, vmA1, ownerA, "app-1", "10.1.0.1", addr(srcA1), addr(srcBoth)),
			clientVM(t, vmA2, ownerA, "db-1", "10.1.0.2", addr(srcA2)),
			clientVM(t, vmB1, ownerB, "db-1", "10.2.0.1", addr(srcB1), addr(srcBoth), fabric),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func emptyStore(t testing.TB) *db.DB {
	d, err := db.Open(t.TempDir()+"/cns.db", db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// startClientServer serves store with client answers on, on 127.0.0.1 and
// on a client-only listener at fabricListen.
func startClientServer(t testing.TB, store *db.DB, warm bool) (s *Server, main, clientOnly string) {
	t.Helper()
	s, err := New(Config{Listen: []string{"127.0.0.1:0"}, UDPSockets: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Access:        Access{AllowTransfer: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		ClientAnswers: policy.ClientAnswers{Networks: []string{"0b0c5b1e-0000-4000-8000-000000000001"}, Listen: []netip.AddrPort{netip.MustParseAddrPort(fabricListen + ":0")}}}, store)
	if err != nil {
		t.Fatal(err)
	}
	if warm {
		if err := s.Warm(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	udp, _ := s.Addrs()
	return s, udp[0], udp[1]
}

// ask sends one query from the source address src over network nw.
func ask(t testing.TB, nw, src, server, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.SetEdns0(1232, false)
	var local net.Addr = &net.UDPAddr{IP: net.ParseIP(src)}
	if nw == "tcp" {
		local = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	c := &dns.Client{Net: nw, Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: local, Timeout: 2 * time.Second}}
	r, _, err := c.Exchange(m, server)
	if err != nil {
		t.Fatalf("%s %s from %s: %v", name, dns.TypeToString[qtype], src, err)
	}
	return r
}

// summary renders an answer: rcode, answer and additional records, and
// the EDE text if any.
func summary(r *dns.Msg) string {
	var b strings.Builder
	b.WriteString(dns.RcodeToString[r.Rcode])
	for _, rr := range r.Answer {
		b.WriteString(" | " + strings.ReplaceAll(rr.String(), "\t", " "))
	}
	for _, rr := range r.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			b.WriteString(" + " + strings.ReplaceAll(rr.String(), "\t", " "))
		}
	}
	if opt := r.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				fmt.Fprintf(&b, " ede %d %q", e.InfoCode, e.ExtraText)
			}
		}
	}
	return b.String()
}

func TestClientAnswers(t *testing.T) {
	const z = "." + zoneName + "."
	instB1 := vmB1 + ".inst." + ownerB + z
	cases := []struct {
		name, src, qname string
		qtype            uint16
		want             string
	}{
		{"svc A, owner A", srcA1, "web.svc" + z, dns.TypeA,
			"NOERROR | web.svc.dc.example.com. 30 IN A 10.1.0.1 | web.svc.dc.example.com. 30 IN A 10.1.0.2"},
		{"svc A, from A's other instance", srcA2, "WEB.Svc" + z, dns.TypeA,
			"NOERROR | WEB.Svc.dc.example.com. 30 IN A 10.1.0.1 | WEB.Svc.dc.example.com. 30 IN A 10.1.0.2"},
		{"svc A, owner B", srcB1, "web.svc" + z, dns.TypeA,
			"NOERROR | web.svc.dc.example.com. 30 IN A 10.2.0.1"},
		{"svc SRV with additionals", srcB1, "web.svc" + z, dns.TypeSRV,
			"NOERROR | web.svc.dc.example.com. 30 IN SRV 0 10 80 " + instB1 + " + " + instB1 + " 30 IN A 10.2.0.1"},
		{"grpclb", srcB1, "_grpclb._tcp.web.svc" + z, dns.TypeSRV,
			"NOERROR | _grpclb._tcp.web.svc.dc.example.com. 30 IN SRV 0 0 8443 web.svc." + ownerB + z +
				" + web.svc." + ownerB + z + " 30 IN A 10.2.0.1"},
		{"grpc_config", srcA1, "_grpc_config.web.svc" + z, dns.TypeTXT,
			`NOERROR | _grpc_config.web.svc.dc.example.com. 30 IN TXT "grpc_config=[]"`},
		{"alias, owner A", srcA1, "db-1.inst" + z, dns.TypeA, "NOERROR | db-1.inst.dc.example.com. 30 IN A 10.1.0.2"},
		{"alias, owner B", srcB1, "db-1.inst" + z, dns.TypeA, "NOERROR | db-1.inst.dc.example.com. 30 IN A 10.2.0.1"},
		{"uuid, owner A", srcA2, vmA1 + ".inst" + z, dns.TypeTXT, `NOERROR | ` + vmA1 + `.inst.dc.example.com. 30 IN TXT "` + vmA1 + `"`},
		{"another owner's uuid: no", srcA1, vmB1 + ".inst" + z, dns.TypeA, "NXDOMAIN"},
		{"self, A1", srcA1, "self.inst" + z, dns.TypeA, "NOERROR | self.inst.dc.example.com. 30 IN A 10.1.0.1"},
		{"self, A2", srcA2, "self.inst" + z, dns.TypeA, "NOERROR | self.inst.dc.example.com. 30 IN A 10.1.0.2"},
		{"self, B1", srcB1, "self.inst" + z, dns.TypeTXT, `NOERROR | self.inst.dc.example.com. 30 IN TXT "` + vmB1 + `"`},
		{"self NODATA", srcB1, "self.inst" + z, dns.TypeAAAA, "NOERROR"},
		{"unknown source", srcNone, "web.svc" + z, dns.TypeA,
			`NXDOMAIN ede 0 "client_answers: the source address identifies no instance"`},
		{"ambiguous source", srcBoth, "web.svc" + z, dns.TypeA,
			`NXDOMAIN ede 0 "client_answers: the source address belongs to several instances"`},
		{"fabric address on the main listener: no one", srcFabric, "self.inst" + z, dns.TypeA,
			`NXDOMAIN ede 0 "client_answers: the source address identifies no instance"`},
		{"owner-qualified, unknown source: as today", srcNone, "web.svc." + ownerB + z, dns.TypeA,
			"NOERROR | web.svc." + ownerB + z + " 30 IN A 10.2.0.1"},
		{"owner-qualified, other owner: as today", srcA1, instB1, dns.TypeA, "NOERROR | " + instB1 + " 30 IN A 10.2.0.1"},
		{"not an owner-less form", srcA1, "nope.dc.example.com.", dns.TypeA, "NXDOMAIN"},
		{"a zone the caller has no names in", srcA1, "web.svc." + otherZone + ".", dns.TypeA,
			`NXDOMAIN ede 0 "client_answers: the asking instance has no names in this zone"`},
		{"there, owner-qualified: as today", srcA1, "web.svc." + ownerA + "." + otherZone + ".", dns.TypeA,
			"NOERROR | web.svc." + ownerA + "." + otherZone + ". 30 IN A 10.3.0.3"},
		{"an empty non-terminal stays one", srcA1, "inst." + ownerA + z, dns.TypeA, "NOERROR"},
		{"owner svc's names: as today", srcA1, "x.inst.svc" + z, dns.TypeA, "NOERROR | x.inst.svc.dc.example.com. 30 IN A 10.9.9.9"},
		{"owner svc's empty non-terminal: as today", srcA1, "inst.svc" + z, dns.TypeA, "NOERROR"},
	}
	for _, warm := range []bool{false, true} {
		s, main, _ := startClientServer(t, clientStore(t), warm)
		for _, tc := range cases {
			for _, nw := range []string{"udp", "tcp"} {
				r := ask(t, nw, tc.src, main, tc.qname, tc.qtype)
				if got := summary(r); got != tc.want {
					t.Errorf("warm %v %s %s: got\n  %s\nwant\n  %s", warm, nw, tc.name, got, tc.want)
				}
				if !r.Authoritative && r.Rcode != dns.RcodeRefused {
					t.Errorf("warm %v %s %s: not authoritative", warm, nw, tc.name)
				}
			}
		}
		// 14 cases answer in a caller's scope, 3 find no one; each over
		// UDP and TCP.
		if st := s.QueryStats(); st.ClientScoped != 28 || st.Unidentified != 6 {
			t.Errorf("warm %v: counted %d scoped and %d unidentified, want 28 and 6", warm, st.ClientScoped, st.Unidentified)
		}
	}
}

// On client_answers' own listener only client-scoped service is offered,
// and a fabric address identifies its instance there.
func TestClientOnlyListener(t *testing.T) {
	const z = "." + zoneName + "."
	_, _, clientOnly := startClientServer(t, clientStore(t), true)
	for _, tc := range []struct {
		name, src, qname string
		qtype            uint16
		want             string
	}{
		{"fabric source identifies B1", srcFabric, "self.inst" + z, dns.TypeA, "NOERROR | self.inst.dc.example.com. 30 IN A 10.2.0.1"},
		{"other sources as on the main listener", srcA1, "web.svc" + z, dns.TypeA,
			"NOERROR | web.svc.dc.example.com. 30 IN A 10.1.0.1 | web.svc.dc.example.com. 30 IN A 10.1.0.2"},
		{"owner-qualified: refused", srcA1, "web.svc." + ownerA + z, dns.TypeA, "REFUSED"},
		{"apex: refused", srcA1, zoneName + ".", dns.TypeSOA, "REFUSED"},
		{"transfer: refused", srcA1, zoneName + ".", dns.TypeAXFR, "REFUSED"},
		{"outside the zones, forwarding off: refused", srcA1, "www.example.org.", dns.TypeA, "REFUSED"},
	} {
		if got := summary(ask(t, "udp", tc.src, clientOnly, tc.qname, tc.qtype)); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
	n := new(dns.Msg)
	n.SetNotify(zoneName + ".")
	if r := exchange(t, clientOnly, "udp", n); r.Rcode != dns.RcodeRefused {
		t.Errorf("NOTIFY on the client-only listener: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	m := new(dns.Msg)
	m.SetQuestion(zoneName+".", dns.TypeAXFR)
	env, err := (&dns.Transfer{}).In(m, clientOnly)
	if err == nil {
		for e := range env {
			err = e.Error
			if len(e.RR) > 0 {
				t.Errorf("AXFR over TCP on the client-only listener gave %d records", len(e.RR))
			}
		}
	}
	if err == nil || !strings.Contains(err.Error(), "rcode: 5") { // REFUSED
		t.Errorf("AXFR over TCP on the client-only listener: %v, want REFUSED", err)
	}
}

// A commit that moves an address to another owner switches the answers
// at once; AXFR never holds an owner-less name.
func TestClientAnswersFollowCommits(t *testing.T) {
	const z = "." + zoneName + "."
	store := clientStore(t)
	_, main, _ := startClientServer(t, store, true)
	if got := summary(ask(t, "udp", srcA2, main, "self.inst"+z, dns.TypeA)); got != "NOERROR | self.inst.dc.example.com. 30 IN A 10.1.0.2" {
		t.Fatalf("before: %s", got)
	}
	// A2 is now owner B's (its records follow).
	moved := clientVM(t, vmA2, ownerB, "db-2", "10.1.0.2", addr(srcA2))
	if _, err := store.Commit(&db.ChangeSet{VMs: []db.VMChange{moved}}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"web.svc" + z:   "NOERROR | web.svc.dc.example.com. 30 IN A 10.1.0.2 | web.svc.dc.example.com. 30 IN A 10.2.0.1",
		"db-1.inst" + z: "NOERROR | db-1.inst.dc.example.com. 30 IN A 10.2.0.1",
		"self.inst" + z: "NOERROR | self.inst.dc.example.com. 30 IN TXT \"" + vmA2 + "\"",
	} {
		qt := dns.TypeA
		if strings.HasPrefix(name, "self") {
			qt = dns.TypeTXT
		}
		if got := summary(ask(t, "udp", srcA2, main, name, qt)); got != want {
			t.Errorf("after the move, %s: %s, want %s", name, got, want)
		}
	}
	// The address leaves A2: nobody again.
	gone := clientVM(t, vmA2, ownerB, "db-2", "10.1.0.2")
	if _, err := store.Commit(&db.ChangeSet{VMs: []db.VMChange{gone}}); err != nil {
		t.Fatal(err)
	}
	if got := summary(ask(t, "udp", srcA2, main, "self.inst"+z, dns.TypeA)); !strings.HasPrefix(got, "NXDOMAIN ede 0") {
		t.Errorf("after the address left: %s", got)
	}

	m := new(dns.Msg)
	m.SetQuestion(zoneName+".", dns.TypeAXFR)
	env, err := (&dns.Transfer{}).In(m, main)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for e := range env {
		if e.Error != nil {
			t.Fatal(e.Error)
		}
		for _, rr := range e.RR {
			names = append(names, rr.Header().Name)
		}
	}
	if len(names) < 10 {
		t.Fatalf("AXFR: %d records", len(names))
	}
	for _, n := range names {
		if slices.Contains([]string{"web.svc" + z, "self.inst" + z, "db-1.inst" + z, "app-1.inst" + z, "_grpclb._tcp.web.svc" + z}, n) {
			t.Errorf("AXFR holds owner-less name %s", n)
		}
	}
}
