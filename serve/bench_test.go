package serve

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

// benchServer builds a server whose zone holds n instance names (A + TXT)
// and n/20 services of 16 members with SRV records, without a store: the
// benchmarks measure the answer path alone.
func benchServer(b *testing.B, n int) (*Server, []string) {
	b.Helper()
	const zname = "dc.cns.example"
	wire, _ := db.ZoneWire(zname)
	apex := testApex()
	z, err := newZone(zname, wire, 1, apex, nil)
	if err != nil {
		b.Fatal(err)
	}
	enc := func(s string) []byte {
		rr, err := dns.NewRR(s)
		if err != nil {
			b.Fatal(err)
		}
		e, err := db.EncodeRR(rr)
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	changes := map[string][]byte{}
	var names []string
	for i := range n {
		name := fmt.Sprintf("%08x-0000-4000-8000-%012x.inst.owner%d.%s.", i, i, i%2000, zname)
		w, _ := db.ZoneWire(name)
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		changes[string(w)] = append(enc(name+" 30 IN A "+ip), enc(name+` 30 IN TXT "`+name[:36]+`"`)...)
		names = append(names, name)
	}
	for s := range n / 20 {
		name := fmt.Sprintf("svc%d.svc.owner%d.%s.", s, s%2000, zname)
		w, _ := db.ZoneWire(name)
		var rrs []byte
		for m := range 16 {
			rrs = append(rrs, enc(fmt.Sprintf("%s 30 IN A 10.200.%d.%d", name, s&255, m))...)
		}
		for m := range 16 {
			rrs = append(rrs, enc(fmt.Sprintf("%s 30 IN SRV 0 10 80 %s", name, names[(s*16+m)%n]))...)
		}
		changes[string(w)] = rrs
		names = append(names, name)
	}
	z.names = (*table)(nil).update(wire, changes)
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil)), udpSize: 1232}
	s.snap.Store(&snapshot{zones: map[string]*zone{string(wire): z}})
	return s, names
}

func benchQuery(b *testing.B, name string, qtype uint16) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.SetEdns0(4096, false)
	pkt, err := m.Pack()
	if err != nil {
		b.Fatal(err)
	}
	return pkt
}

// BenchmarkAnswer measures parsing a UDP query and building its answer,
// the whole per-query work but the socket calls. 1e9 / (ns/op) is the
// answers per CPU-second one core can give.
func BenchmarkAnswer(b *testing.B) {
	s, names := benchServer(b, 300_000)
	cases := []struct {
		name  string
		qname string
		qtype uint16
	}{
		{"A", names[12345], dns.TypeA},
		{"TXT", names[777], dns.TypeTXT},
		{"service_A_16", names[300_000+42], dns.TypeA},
		{"SRV_16_additionals", names[300_000+42], dns.TypeSRV},
		{"NXDOMAIN", "nope.inst.owner1.dc.cns.example.", dns.TypeA},
		{"NODATA", names[4242], dns.TypeAAAA},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			pkt := benchQuery(b, tc.qname, tc.qtype)
			out := make([]byte, 0, 4096)
			var q query
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if r := s.handle(&q, pkt, out[:0], minUDPSize); len(r) == 0 {
					b.Fatal("no answer")
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "answers/s")
		})
	}
}

// BenchmarkAnswerMix cycles through many names, so table lookups miss the
// CPU caches the way a real query mix does.
func BenchmarkAnswerMix(b *testing.B) {
	s, names := benchServer(b, 300_000)
	pkts := make([][]byte, 0, 4096)
	for i := 0; i < 4096; i++ {
		name := names[(i*7919)%len(names)]
		qt := dns.TypeA
		if i%10 == 0 {
			qt = dns.TypeTXT
		}
		pkts = append(pkts, benchQuery(b, name, qt))
	}
	out := make([]byte, 0, 4096)
	var q query
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.handle(&q, pkts[i&4095], out[:0], minUDPSize)
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "answers/s")
}
