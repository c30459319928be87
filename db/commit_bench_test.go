package db

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/miekg/dns"
)

// benchVMs is the number of VMs the benchmark stores hold before the
// timed commits (CNS_BENCH_VMS, default 10000).
func benchVMs(b *testing.B) int {
	if s := os.Getenv("CNS_BENCH_VMS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("CNS_BENCH_VMS=%q: want a number of VMs", s)
		}
		return n
	}
	return 10_000
}

const benchZone = "dc.cns.example"

// benchVM is what VM i contributes at version v (each version moves it to
// another address), in the shape records.Compute gives for bench/run.sh's
// data center: instance A and TXT, an alias A for every other VM, the CMON
// CNAME, an AAAA for one VM in ten, membership of a service (A, TXT and,
// for some, SRV) and the PTR in 10.in-addr.arpa. ~50 VMs per owner.
func benchVM(i, v int) VMChange {
	uuid := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
	owner := fmt.Sprintf("%08x-1111-4000-8000-%012x", i/50, i/50)
	host := i + 256 + v*(1<<20)
	ip := net.IPv4(10, byte(host>>16), byte(host>>8), byte(host))
	hdr := func(name string, t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: 30}
	}
	inst := uuid + ".inst." + owner + "." + benchZone + "."
	recs := []Record{
		{Zone: benchZone, RR: &dns.A{Hdr: hdr(inst, dns.TypeA), A: ip}},
		{Zone: benchZone, RR: &dns.TXT{Hdr: hdr(inst, dns.TypeTXT), Txt: []string{uuid}}},
		{Zone: benchZone, RR: &dns.CNAME{Hdr: hdr(uuid+".cmon."+benchZone+".", dns.TypeCNAME), Target: "cmon." + benchZone + "."}},
	}
	target := inst
	if i%2 == 0 {
		alias := fmt.Sprintf("web-%d.inst.%s.%s.", i, owner, benchZone)
		recs = append(recs, Record{Zone: benchZone, RR: &dns.A{Hdr: hdr(alias, dns.TypeA), A: ip}})
		target = alias
	}
	if i%10 == 0 {
		recs = append(recs, Record{Zone: benchZone, RR: &dns.AAAA{Hdr: hdr(inst, dns.TypeAAAA), AAAA: net.ParseIP(fmt.Sprintf("2001:db8::%x:%x", v, i))}})
	}
	svc := fmt.Sprintf("svc%d.svc.%s.%s.", i/15, owner, benchZone)
	recs = append(recs,
		Record{Zone: benchZone, RR: &dns.A{Hdr: hdr(svc, dns.TypeA), A: ip}},
		Record{Zone: benchZone, RR: &dns.TXT{Hdr: hdr(svc, dns.TypeTXT), Txt: []string{uuid}}})
	if (i/15)%3 == 0 {
		recs = append(recs, Record{Zone: benchZone, RR: &dns.SRV{Hdr: hdr(svc, dns.TypeSRV), Priority: 0, Weight: 10, Port: 443, Target: target}})
	}
	ptr, _ := dns.ReverseAddr(ip.String())
	recs = append(recs, Record{Zone: "10.in-addr.arpa", RR: &dns.PTR{Hdr: hdr(ptr, dns.TypePTR), Ptr: target}, Pref: 1})
	return VMChange{UUID: uuid, Meta: []byte(`{"bench":true}`), Records: recs, Hash: uint64(i)<<20 | uint64(v)}
}

func benchZoneConfig() *ZoneConfig {
	a := Apex{MName: "ns1.cns.example.", RName: "hostmaster.cns.example.", Refresh: 30, Retry: 60,
		Expire: 2592000, Minimum: 30, SOATTL: 30, NS: []string{"ns1.cns.example."}, NSTTL: 3600}
	return &ZoneConfig{Forward: map[string]Apex{benchZone: a}, Reverse: a}
}

// benchStore writes n VMs into a new file (without fsync, in batches of
// 5000) and reopens it as cns serve does, with fsync on every commit.
func benchStore(b *testing.B, n int) *DB {
	b.Helper()
	path := filepath.Join(b.TempDir(), "cns.db")
	d, err := Open(path, Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	cs := &ChangeSet{Zones: benchZoneConfig()}
	for i := range n {
		cs.VMs = append(cs.VMs, benchVM(i, 0))
		if len(cs.VMs) == 5000 || i == n-1 {
			if _, err := d.Commit(cs); err != nil {
				b.Fatal(err)
			}
			cs = &ChangeSet{}
		}
	}
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	if d, err = Open(path, Options{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

// BenchmarkCommit measures change sets of batch VMs, each VM moving to a
// new address (all its records replaced, service RRsets and the PTR
// included), into a store already holding CNS_BENCH_VMS VMs, with fsync as
// in production. VMchanges/s is the commit throughput (target ≥ 5,000/s in
// batches); one op is one commit.
func BenchmarkCommit(b *testing.B) {
	n := benchVMs(b)
	d := benchStore(b, n)
	next, version := 0, 1
	for _, batch := range []int{1, 100, 1000, 5000} {
		if batch > n {
			continue
		}
		b.Run(fmt.Sprintf("vms=%d/batch=%d", n, batch), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				cs := &ChangeSet{Cause: "bench", VMs: make([]VMChange, 0, batch)}
				for range batch {
					cs.VMs = append(cs.VMs, benchVM(next, version))
					if next++; next == n {
						next, version = 0, version+1
					}
				}
				b.StartTimer()
				if _, err := d.Commit(cs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "VMchanges/s")
		})
	}
}

// A change set whose Stop is closed stores nothing and tells no hook,
// however far Commit had got; an open Stop changes nothing.
func TestCommitStops(t *testing.T) {
	d, _ := openTest(t, Options{})
	hooks := 0
	d.OnCommit(func(*Committed) { hooks++ })
	open := make(chan struct{})
	first := &ChangeSet{Zones: benchZoneConfig(), Stop: open}
	for i := range 10 {
		first.VMs = append(first.VMs, benchVM(i, 0))
	}
	mustCommit(t, d, first)
	before, err := d.Zones()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 600} { // stopped before the first VM, and between two runs of them
		closed := make(chan struct{})
		close(closed)
		cs := &ChangeSet{Stop: closed}
		for i := range n {
			cs.VMs = append(cs.VMs, benchVM(i, 1))
		}
		if _, err := d.Commit(cs); err != ErrStopped {
			t.Fatalf("%d VMs: Commit = %v, want ErrStopped", n, err)
		}
		after, err := d.Zones()
		if err != nil {
			t.Fatal(err)
		}
		hashes, err := d.VMHashes()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(before, after) || len(hashes) != 10 || hooks != 1 {
			t.Errorf("%d VMs stopped: zones %v → %v, %d VMs stored, %d hooks; want no change", n, before, after, len(hashes), hooks)
		}
	}
}
