package serve

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

// While a transfer is sent from the store, the warm-up waits; the
// transfer is whole meanwhile, and the warm-up finishes once it is done.
func TestWarmWaitsForColdTransfer(t *testing.T) {
	s, _, addr := xfrServer(t, 3000, Access{AllowTransfer: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	defer func(c int) { warmChunk = c }(warmChunk)
	warmChunk = 1 << 10
	s.cold.enter() // a transfer from the store in progress
	done := make(chan error, 1)
	go func() { done <- s.Warm() }()
	select {
	case err := <-done:
		t.Fatalf("the warm-up ended (err %v) while a transfer was sent from the store", err)
	case <-time.After(50 * time.Millisecond):
	}
	if s.Warmed() {
		t.Fatal("warm while a transfer was sent from the store")
	}
	rrs, err := transfer(t, addr, "127.0.0.1", axfrMsg(), nil)
	if err != nil || len(rrs) != 2+2+6000 {
		t.Fatalf("cold AXFR while the warm-up waits: %d records, %v", len(rrs), err)
	}
	s.cold.leave()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !s.Warmed() {
		t.Error("not warm after the transfer ended")
	}
}

// A commit between two chunks of the warm-up's scan makes it read the
// zone again in one transaction: a name the commit adds before the chunks
// already read is in the table (a scan going on from where it was would
// miss it).
func TestWarmCommitBetweenChunks(t *testing.T) {
	s, d, _ := xfrServer(t, 300, Access{})
	defer func(c int) { warmChunk = c }(warmChunk)
	warmChunk = 1 << 10
	z := s.zoneByName(zoneName)
	wholeChunks := 0
	whole, err := s.scanTable(z, 0, func() { wholeChunks++ })
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	tb, err := s.scanTable(z, 0, func() {
		if chunks++; chunks == 3 {
			if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{{UUID: vmB, Records: []db.Record{
				{Zone: zoneName, RR: mustRR(t, "a.inst.o.dc.example.com. 30 IN A 10.9.9.9")}}}}}); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if wholeChunks < 4 || chunks != 3 {
		t.Fatalf("%d chunks for the zone, %d with the commit: the test needs a commit between two", wholeChunks, chunks)
	}
	if tb.names != whole.names+1 {
		t.Errorf("table after a commit between chunks: %d names, want %d", tb.names, whole.names+1)
	}
	if _, found := tb.lookup(wireName(t, "a.inst.o.dc.example.com.")); !found {
		t.Error("the name the commit added is not in the table")
	}
}

// The chunks of a backlog leave the zone served from the store, answering
// every name committed so far; the end of the backlog (db.Backlog) has the
// table built once (rewarmAfterBacklog), with every name in it.
func TestBacklogServedFromStoreThenWarmed(t *testing.T) {
	s, d, addr := xfrServer(t, 300, Access{})
	if err := s.Warm(); err != nil {
		t.Fatal(err)
	}
	before := s.zoneByName(zoneName).names.names
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { s.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	vm := func(uuid, name, ip string) db.VMChange {
		return db.VMChange{UUID: uuid, Records: []db.Record{{Zone: zoneName, RR: mustRR(t, name+" 30 IN A "+ip)}}}
	}
	ask := func(name string) []dns.RR {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		return exchange(t, addr, "tcp", m).Answer
	}

	d.Backlog().Open()
	if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{vm(vmB, "chunk1.inst.o.dc.example.com.", "10.9.0.1")}}); err != nil {
		t.Fatal(err)
	}
	if s.Warmed() {
		t.Fatal("the table was updated for a chunk of a backlog")
	}
	for _, name := range []string{"chunk1.inst.o.dc.example.com.", "h7.inst.o.dc.example.com."} {
		if got := ask(name); len(got) != 1 {
			t.Fatalf("%s while the backlog is committed: %v", name, got)
		}
	}
	if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{vm("cccccccc-0000-4000-8000-000000000003", "last.inst.o.dc.example.com.", "10.9.0.2")}}); err != nil {
		t.Fatal(err)
	}
	if s.Warmed() {
		t.Fatal("the table was built before the backlog ended")
	}
	d.Backlog().Close()
	deadline := time.Now().Add(10 * time.Second)
	for !s.Warmed() {
		if time.Now().After(deadline) {
			t.Fatal("the table was not built after the backlog ended")
		}
		time.Sleep(time.Millisecond)
	}
	tb := s.zoneByName(zoneName).names
	for _, name := range []string{"chunk1.inst.o.dc.example.com.", "last.inst.o.dc.example.com.", "h299.inst.o.dc.example.com."} {
		if _, found := tb.lookup(wireName(t, name)); !found {
			t.Errorf("%s is not in the table built after the backlog", name)
		}
	}
	if tb.names != before+2 {
		t.Errorf("table after the backlog: %d names, want %d", tb.names, before+2)
	}
}
