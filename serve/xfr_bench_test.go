package serve

import (
	"fmt"
	"go.uber.org/goleak"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

// Transfer and restart benchmarks over a real store holding a data center
// shaped like bench/run.sh's (CNS_BENCH_VMS VMs, default 100000: the size
// the targets are set at). The store is built once per test binary
// (~10-20 s at 100k VMs) and shared.

const storeBenchZone = "dc.cns.example"

func storeBenchVMs(b *testing.B) int {
	if s := os.Getenv("CNS_BENCH_VMS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("CNS_BENCH_VMS=%q: want a number of VMs", s)
		}
		return n
	}
	return 100_000
}

// storeBenchVM is what VM i contributes at version v: instance A and TXT,
// an alias A for every other VM, the CMON CNAME, an AAAA for one VM in
// ten, membership of a service of 15 (A, TXT, SRV for a third of the
// services) and the PTR in 10.in-addr.arpa; ~50 VMs per owner.
func storeBenchVM(i, v int) db.VMChange {
	uuid := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
	owner := fmt.Sprintf("%08x-1111-4000-8000-%012x", i/50, i/50)
	host := i + 256 + v*(1<<20)
	ip := net.IPv4(10, byte(host>>16), byte(host>>8), byte(host))
	hdr := func(name string, t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: 30}
	}
	const z = storeBenchZone
	inst := uuid + ".inst." + owner + "." + z + "."
	recs := []db.Record{
		{Zone: z, RR: &dns.A{Hdr: hdr(inst, dns.TypeA), A: ip}},
		{Zone: z, RR: &dns.TXT{Hdr: hdr(inst, dns.TypeTXT), Txt: []string{uuid}}},
		{Zone: z, RR: &dns.CNAME{Hdr: hdr(uuid+".cmon."+z+".", dns.TypeCNAME), Target: "cmon." + z + "."}},
	}
	target := inst
	if i%2 == 0 {
		alias := fmt.Sprintf("web-%d.inst.%s.%s.", i, owner, z)
		recs = append(recs, db.Record{Zone: z, RR: &dns.A{Hdr: hdr(alias, dns.TypeA), A: ip}})
		target = alias
	}
	if i%10 == 0 {
		recs = append(recs, db.Record{Zone: z, RR: &dns.AAAA{Hdr: hdr(inst, dns.TypeAAAA), AAAA: net.ParseIP(fmt.Sprintf("2001:db8::%x:%x", v, i))}})
	}
	svc := fmt.Sprintf("svc%d.svc.%s.%s.", i/15, owner, z)
	recs = append(recs,
		db.Record{Zone: z, RR: &dns.A{Hdr: hdr(svc, dns.TypeA), A: ip}},
		db.Record{Zone: z, RR: &dns.TXT{Hdr: hdr(svc, dns.TypeTXT), Txt: []string{uuid}}})
	if (i/15)%3 == 0 {
		recs = append(recs, db.Record{Zone: z, RR: &dns.SRV{Hdr: hdr(svc, dns.TypeSRV), Priority: 0, Weight: 10, Port: 443, Target: target}})
	}
	ptr, _ := dns.ReverseAddr(ip.String())
	recs = append(recs, db.Record{Zone: "10.in-addr.arpa", RR: &dns.PTR{Hdr: hdr(ptr, dns.TypePTR), Ptr: target}, Pref: 1})
	return db.VMChange{UUID: uuid, Meta: []byte(`{"bench":true}`), Records: recs, Hash: uint64(i)<<20 | uint64(v)}
}

var storeBench struct {
	sync.Mutex
	n    int
	dir  string
	path string
}

// storeBenchFile returns a closed db file holding n VMs, built once.
func storeBenchFile(b *testing.B, n int) string {
	storeBench.Lock()
	defer storeBench.Unlock()
	if storeBench.n == n {
		return storeBench.path
	}
	if storeBench.dir != "" {
		os.RemoveAll(storeBench.dir)
	}
	dir, err := os.MkdirTemp("", "cns-serve-bench")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "cns.db")
	d, err := db.Open(path, db.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	a := db.Apex{MName: "ns1.cns.example.", RName: "hostmaster.cns.example.", Refresh: 30, Retry: 60,
		Expire: 2592000, Minimum: 30, SOATTL: 30, NS: []string{"ns1.cns.example."}, NSTTL: 3600}
	cs := &db.ChangeSet{Zones: &db.ZoneConfig{Forward: map[string]db.Apex{storeBenchZone: a}, Reverse: a}}
	for i := range n {
		cs.VMs = append(cs.VMs, storeBenchVM(i, 0))
		if len(cs.VMs) == 5000 || i == n-1 {
			if _, err := d.Commit(cs); err != nil {
				b.Fatal(err)
			}
			cs = &db.ChangeSet{}
		}
	}
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	storeBench.n, storeBench.dir, storeBench.path = n, dir, path
	return path
}

// TestMain removes the shared benchmark store.
// TestMain fails the run when a test leaves a goroutine behind (every
// goroutine the server starts has an owner that waits for it), and removes
// the benchmarks' shared store.
func TestMain(m *testing.M) {
	code := m.Run()
	if storeBench.dir != "" {
		os.RemoveAll(storeBench.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// storeBenchServer opens a private copy of the shared store (benchmarks
// commit to it) and serves it, warm, without sockets.
//
// CNS_BENCH_DB names a db that bench/run.sh prepared instead (its forward
// zone is the same dc.cns.example; 1M VMs take minutes to build here). It
// is opened in place, read-write: pass a scratch copy.
func storeBenchServer(b *testing.B) (*Server, *db.DB, *zone) {
	b.Helper()
	path := os.Getenv("CNS_BENCH_DB")
	if path == "" {
		src := storeBenchFile(b, storeBenchVMs(b))
		data, err := os.ReadFile(src)
		if err != nil {
			b.Fatal(err)
		}
		path = filepath.Join(b.TempDir(), "cns.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	d, err := db.Open(path, db.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	s, err := New(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, d)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.Warm(); err != nil {
		b.Fatal(err)
	}
	wire, _ := db.ZoneWire(storeBenchZone)
	return s, d, s.snap.Load().zones[string(wire)]
}

// processCPU is the CPU time the process has used (user and system), in
// nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func xfrQuery(b *testing.B, m *dns.Msg) *query {
	b.Helper()
	pkt, err := m.Pack()
	if err != nil {
		b.Fatal(err)
	}
	q := &query{tcp: true}
	if res := q.parse(pkt); res != parseOK {
		b.Fatalf("parse %v: %v", m.Question, res)
	}
	return q
}

// BenchmarkAXFR encodes the whole forward zone from the warm snapshot into
// transfer messages written to io.Discard: the server's share of an AXFR
// (target: ≤ 1.5× Knot's time). One op is one whole transfer of a table
// that has sent one before; first-cpu-ns is the CPU time of that first
// transfer, which also builds the table's transfer order.
func BenchmarkAXFR(b *testing.B) {
	s, _, z := storeBenchServer(b)
	m := new(dns.Msg)
	m.SetAxfr(storeBenchZone + ".")
	q := xfrQuery(b, m)
	var res transferResult
	transfer := func() {
		x := &xfrWriter{w: io.Discard, q: q, zone: z.wire, limit: xfrMessageLimit, now: time.Now()}
		var err error
		if res, err = s.writeTransfer(x, z, q, netip.Addr{}); err != nil || res.kind != "AXFR" {
			b.Fatalf("transfer %+v: %v", res, err)
		}
	}
	cpu0 := processCPU(b)
	transfer()
	first := processCPU(b) - cpu0
	b.ReportAllocs()
	cpu0 = processCPU(b)
	for b.Loop() {
		transfer()
	}
	// CPU time moves less than wall-clock time when other work shares
	// the machine (it counts the garbage collector's threads too).
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	per := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(res.records)/per, "records/s")
	b.ReportMetric(float64(res.bytes)/per/1e6, "MB/s")
	b.ReportMetric(float64(res.records), "records")
	b.ReportMetric(float64(res.bytes), "wire-bytes")
	b.ReportMetric(float64(first), "first-cpu-ns")
}

// BenchmarkIXFR answers an IXFR for a one-VM change (the VM moved to a new
// address: its A, alias A, AAAA, service A records change) from the
// journal in the store, as a secondary one serial behind asks for it.
// IXFR-bytes is the size of the answer (target ≤ 2 KiB whatever the zone
// size).
func BenchmarkIXFR(b *testing.B) {
	s, d, z := storeBenchServer(b)
	from := z.serial
	if _, err := d.Commit(&db.ChangeSet{Cause: "bench", VMs: []db.VMChange{storeBenchVM(4242, 1)}}); err != nil {
		b.Fatal(err)
	}
	z = s.snap.Load().zones[string(z.wire)]
	if z.serial == from {
		b.Fatal("the commit did not reach the snapshot")
	}
	m := new(dns.Msg)
	m.SetIxfr(storeBenchZone+".", from, "ns1.cns.example.", "hostmaster.cns.example.")
	q := xfrQuery(b, m)
	var res transferResult
	b.ReportAllocs()
	for b.Loop() {
		x := &xfrWriter{w: io.Discard, q: q, zone: z.wire, limit: xfrMessageLimit, now: time.Now()}
		var err error
		if res, err = s.writeTransfer(x, z, q, netip.Addr{}); err != nil || res.kind != "IXFR" {
			b.Fatalf("transfer %+v: %v", res, err)
		}
	}
	b.ReportMetric(float64(res.bytes), "IXFR-bytes")
	b.ReportMetric(float64(res.records), "records")
}

// BenchmarkRestart opens the store and answers a first query from it, as
// cns serve does before its in-memory tables are built (no process start,
// no sockets). Target: restart to first answer ≤ 0.3 s at 100k VMs.
func BenchmarkRestart(b *testing.B) {
	path := storeBenchFile(b, storeBenchVMs(b))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pkt := benchQuery(b, fmt.Sprintf("%08x-0000-4000-8000-%012x.inst.%08x-1111-4000-8000-%012x.%s.", 4243, 4243, 4243/50, 4243/50, storeBenchZone), dns.TypeA)
	out := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		d, err := db.Open(path, db.Options{})
		if err != nil {
			b.Fatal(err)
		}
		s, err := New(Config{Logger: log}, d)
		if err != nil {
			b.Fatal(err)
		}
		var q query
		r := s.handle(&q, pkt, out[:0], minUDPSize)
		if len(r) < headerLen || r[3]&0xf != 0 || r[7] == 0 {
			b.Fatalf("first answer %x: want NOERROR with an answer", r)
		}
		s.Close()
		d.Close()
	}
}

// BenchmarkWarm builds the in-memory tables of every zone from the store,
// which cns serve does in the background after its first answers.
func BenchmarkWarm(b *testing.B) {
	path := storeBenchFile(b, storeBenchVMs(b))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := db.Open(path, db.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	b.ReportAllocs()
	for b.Loop() {
		s, err := New(Config{Logger: log}, d)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Warm(); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// BenchmarkXFROrder builds the transfer order of the warm forward zone's
// table: the work the first transfer of a table does before it sends.
func BenchmarkXFROrder(b *testing.B) {
	_, _, z := storeBenchServer(b)
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		if buildXFROrder(z.names, len(z.wire)) == nil {
			b.Fatal("no order")
		}
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}
