package main

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/serve/secondarytest"
)

// Migrating from a running triton-cns (docs/migrating.md): the data center's secondaries hold every zone at a serial
// the reference numbered; the reference's services stop, cns starts on
// the same address with an empty db (redis is not carried over), and the
// secondaries must take cns's first serial as newer (RFC 1982) and
// transfer its zone, serving the old one until then.
//
// The reference's zone is served to the secondary by a stand-in that
// answers as the reference does on the wire (SOA; AXFR and IXFR both as a
// full transfer, CNS-66): the secondary really transfers and holds it, at
// the serial the reference's nextSerial gives for now. Seeding cns's db
// with that serial instead would test cns's serial arithmetic, not the
// secondary's acceptance of the jump the operator will see.

// referenceSerial is the reference's currentSerial (lib/utils.js): 10 s
// buckets since 1900 with 31-day months.
func referenceSerial(t time.Time) uint32 {
	t = t.UTC()
	v := ((((uint32(t.Year()-1900)*12+uint32(t.Month()-1))*31+uint32(t.Day()-1))*24+uint32(t.Hour()))*60+uint32(t.Minute()))*6 + uint32(t.Second()/10)
	return v
}

func TestReferenceSerialFormula(t *testing.T) {
	// The reference's own test (test/unit/utils.test.js).
	at := time.Date(2015, 10, 1, 3, 24, 0, 0, time.UTC)
	if got := referenceSerial(at); got != 372030984 {
		t.Errorf("currentSerial(2015-10-01T03:24:00Z) = %d, want 372030984", got)
	}
	if referenceSerial(at.Add(4*time.Second)) != 372030984 || referenceSerial(at.Add(11*time.Second)) != 372030985 {
		t.Error("not 10-second buckets")
	}
}

func TestMigrationFromReferenceSerial(t *testing.T) {
	for _, k := range interopKinds(t) {
		t.Run(string(k), func(t *testing.T) { testMigration(t, k) })
	}
}

func testMigration(t *testing.T, kind secondarytest.Kind) {
	const zone = "us-west-1.int.example.com"
	// The reference opens a serial at currentSerial()+1 (nextSerial).
	refSerial := referenceSerial(time.Now()) + 1
	port, err := secondarytest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	primary := fmt.Sprintf("127.0.0.1:%d", port)

	// 1. The reference serves the zone; the secondary transfers it.
	old := startReferenceStandIn(t, primary, zone, refSerial)
	secPort, err := secondarytest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	sec := secondarytest.Start(t, secondarytest.Config{Kind: kind, Primary: primary, Zones: []string{zone}, Port: secPort})
	if err := sec.WaitSerial(zone, refSerial, interopPropagation); err != nil {
		t.Fatal(err)
	}
	oldName := "old-only." + zone
	servesOld := func(when string) {
		r, err := sec.Query(oldName, dns.TypeA)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("%s: the secondary does not serve the reference's %s: %v %v", when, oldName, err, r)
		}
	}
	servesOld("after the first transfer")

	// 2. The reference's services stop: the secondary keeps serving.
	old.stop()
	servesOld("with no primary")

	// 3. cns starts on the same address, with an empty db.
	dir := t.TempDir()
	cfg := testConfig(t, dir, "testdata/inventory.json", func(c map[string]any) {
		c["dns_listen"] = []string{primary}
		c["allow_transfer"] = []string{"127.0.0.1"}
		c["also_notify"] = []string{fmt.Sprintf("127.0.0.1:%d", secPort)}
	})
	p := startCNS(t, cfg)
	p.waitCommitted(0)
	soa := p.query("udp", zone, dns.TypeSOA)
	if len(soa.Answer) != 1 {
		t.Fatalf("cns SOA: %v", soa)
	}
	cnsSerial := soa.Answer[0].(*dns.SOA).Serial
	// RFC 1982: newer when the difference, mod 2^32, is below 2^31.
	if d := cnsSerial - refSerial; d == 0 || d >= 1<<31 {
		t.Fatalf("cns's first serial %d is not after the reference's %d (RFC 1982)", cnsSerial, refSerial)
	}
	t.Logf("reference serial %d, cns serial %d: %d ahead, %d of 2^31 used", refSerial, cnsSerial, cnsSerial-refSerial, cnsSerial-refSerial)

	// 4. The secondary takes cns's zone (NOTIFY, then IXFR from a serial
	// cns never had: a full transfer) and no longer serves the old one.
	if err := sec.WaitSerial(zone, cnsSerial, interopPropagation); err != nil {
		t.Fatal(err)
	}
	want := axfrFrom(t, primary, zone)
	got, err := sec.Transfer(zone)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffRRs(want, got); d != "" {
		t.Errorf("%s serves another zone than cns:\n%s", kind, d)
	}
	if r, err := sec.Query(oldName, dns.TypeA); err != nil || r.Rcode != dns.RcodeNameError {
		t.Errorf("%s still answers the reference's %s: %v %v", kind, oldName, err, r)
	}
}

// axfrFrom reads zone from addr by AXFR, closing SOA dropped.
func axfrFrom(t *testing.T, addr, zone string) []dns.RR {
	t.Helper()
	m := new(dns.Msg)
	m.SetAxfr(dns.Fqdn(zone))
	rrs, err := transferIn(addr, m)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rrs); n >= 2 && rrs[n-1].Header().Rrtype == dns.TypeSOA {
		rrs = rrs[:n-1]
	}
	return rrs
}

// referenceStandIn answers for one zone as the reference's cns-server
// does on the wire: the SOA (its refresh 30, retry 60, expire 30 days,
// minimum 30), NS my_name, records with TTL 30; AXFR and IXFR both get
// the whole zone.
type referenceStandIn struct {
	udp, tcp *dns.Server
}

func startReferenceStandIn(t *testing.T, addr, zone string, serial uint32) *referenceStandIn {
	t.Helper()
	apex := dns.Fqdn(zone)
	mustRR := func(s string) dns.RR {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return rr
	}
	soa := mustRR(fmt.Sprintf("%s 30 IN SOA cns.us-west-1.example.com. hostmaster.example.com. %d 30 60 2592000 30", apex, serial))
	ns := mustRR(fmt.Sprintf("%s 3600 IN NS cns.us-west-1.example.com.", apex))
	data := []dns.RR{
		mustRR("old-only." + apex + " 30 IN A 192.0.2.99"),
		mustRR("old-only." + apex + ` 30 IN TXT "e0a6a0d2-0000-4000-8000-000000000001"`),
	}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		if len(q.Question) != 1 {
			return
		}
		qn, qt := strings.ToLower(q.Question[0].Name), q.Question[0].Qtype
		if qt == dns.TypeAXFR || qt == dns.TypeIXFR {
			ch := make(chan *dns.Envelope, 1)
			ch <- &dns.Envelope{RR: append(append([]dns.RR{soa, ns}, data...), soa)}
			close(ch)
			(&dns.Transfer{}).Out(w, q, ch)
			w.Hijack()
			return
		}
		r := new(dns.Msg)
		r.SetReply(q)
		r.Authoritative = true
		switch {
		case qn == apex && qt == dns.TypeSOA:
			r.Answer = []dns.RR{soa}
		case qn == apex && qt == dns.TypeNS:
			r.Answer = []dns.RR{ns}
		default:
			found := qn == apex
			for _, rr := range data {
				if rr.Header().Name == qn {
					found = true
					if rr.Header().Rrtype == qt {
						r.Answer = append(r.Answer, rr)
					}
				}
			}
			if !found {
				r.Rcode = dns.RcodeNameError
			}
			if len(r.Answer) == 0 {
				r.Ns = []dns.RR{soa}
			}
		}
		w.WriteMsg(r)
	})
	s := &referenceStandIn{}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	started := make(chan struct{}, 2)
	s.udp = &dns.Server{PacketConn: pc, Handler: handler, NotifyStartedFunc: func() { started <- struct{}{} }}
	s.tcp = &dns.Server{Listener: l, Handler: handler, NotifyStartedFunc: func() { started <- struct{}{} }}
	go s.udp.ActivateAndServe()
	go s.tcp.ActivateAndServe()
	<-started
	<-started
	t.Cleanup(s.stop)
	return s
}

// stop shuts both listeners: the address is free for cns.
func (s *referenceStandIn) stop() {
	s.udp.Shutdown()
	s.tcp.Shutdown()
}
