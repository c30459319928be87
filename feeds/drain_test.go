package feeds_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/hysteresis"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// A backlog is committed in chunks, the next one computed while the last
// one commits; VMs that change meanwhile (some of them in the chunk being
// committed) end up as the same store a chunk-by-chunk Flush makes of the
// final inventory: every name, record and VM hash the same.
func TestDrainMatchesSerialFlush(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 1200, Seed: 7})

	// Run drains the backlog while VMs keep changing.
	piped, u := windowUpdater(t, time.Millisecond)
	u.SetSizes(150, 0)
	var commits atomic.Int64 // counted on the updater's commit goroutine
	piped.OnCommit(func(*db.Committed) { commits.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { u.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	first := *inv
	first.VMs = slices.Clone(inv.VMs)
	u.SetInventory(&first, "load")
	for round := range 20 {
		for i := round; i < len(inv.VMs); i += 97 { // spread over the chunks
			vm := inv.VMs[i]
			alias := fmt.Sprintf("renamed-%d-%d", round, i)
			vm.Alias = &alias
			inv.VMs[i] = vm
			u.SetVM(&vm, "renamed")
		}
		time.Sleep(time.Millisecond) // let commits happen between the rounds
	}
	deadline := time.Now().Add(time.Minute)
	for u.Pending() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still %d pending after a minute", u.Pending())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := commits.Load(); n < int64(len(inv.VMs)/150) {
		t.Errorf("%d commits for %d VMs in chunks of 150", n, len(inv.VMs))
	}

	// The same final inventory, one Flush at a time.
	serial, su := windowUpdater(t, time.Millisecond)
	su.SetSizes(150, 0)
	final := *inv
	su.SetInventory(&final, "load")
	flushAll(t, su)

	for _, zone := range []string{hzZone} {
		a, b := dump(t, piped, zone), dump(t, serial, zone)
		if len(a) < len(inv.VMs) || !slices.Equal(a, b) {
			t.Errorf("zone %s: %d names drained, %d flushed; first difference: %v", zone, len(a), len(b), firstDiff(a, b))
		}
	}
	ha, _ := piped.VMHashes()
	hb, _ := serial.VMHashes()
	if len(ha) != len(hb) {
		t.Errorf("%d VM hashes drained, %d flushed", len(ha), len(hb))
	}
	for id, h := range hb {
		if ha[id] != h {
			t.Errorf("vm %s: hash %x drained, %x flushed", id, ha[id], h)
			break
		}
	}
}

// windowUpdater is an updater of hzConfig's zone on a fresh store (closed
// when the test ends), with batch window window (1 ms for Run's drains).
func windowUpdater(t *testing.T, window time.Duration) (*db.DB, *feeds.Updater) {
	t.Helper()
	return loggingUpdater(t, window, slog.DiscardHandler)
}

// loggingUpdater is windowUpdater logging to log.
func loggingUpdater(t *testing.T, window time.Duration, log slog.Handler) (*db.DB, *feeds.Updater) {
	t.Helper()
	rc, zc := hzConfig()
	store, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	u, err := feeds.NewUpdater(store, feeds.Options{Records: rc, Zones: zc, BatchWindow: window,
		Logger: slog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	return store, u
}

// flushAll commits until nothing is pending, one Flush at a time.
func flushAll(t *testing.T, u *feeds.Updater) {
	t.Helper()
	for u.Pending() > 0 {
		if err := u.Flush(); err != nil {
			t.Fatal(err)
		}
	}
}

// dump lists a zone's names with their records, in the store's order.
func dump(t *testing.T, store *db.DB, zone string) []string {
	var out []string
	err := store.ScanZone(zone, func(owner []byte, rrs db.RRs) error {
		out = append(out, fmt.Sprintf("%x %x", owner, rrs))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return a[i] + " / " + b[i]
		}
	}
	return "one is a prefix of the other"
}

// A first load in chunks writes the hysteresis state of services whose
// members are all up only with the last chunk. A crash after the first
// chunk loses nothing a restart does not rebuild: the restart's listing
// makes the same store (every service's state, name and record) as a
// load that was never interrupted; and the state of a service that
// remembers something (here members down by their status) is written
// with the chunk that changed it.
func TestBacklogCrashAfterAChunk(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 1200, Seed: 11})
	down := 0
	for i := range inv.VMs {
		if inv.VMs[i].Tags["triton.cns.services"] != nil && i%7 == 0 {
			inv.VMs[i].CustomerMetadata = map[string]any{"triton.cns.status": "down"}
			down++
		}
	}
	if down == 0 {
		t.Fatal("no service members in the inventory")
	}
	rc, zc := hzConfig()
	now := func() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) }
	open := func(path string) (*db.DB, *feeds.Updater) {
		store, err := db.Open(path, db.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		u, err := feeds.NewUpdater(store, feeds.Options{Records: rc, Zones: zc, Now: now, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		u.SetSizes(150, 0)
		load := *inv
		load.VMs = slices.Clone(inv.VMs)
		u.SetInventory(&load, "load")
		return store, u
	}
	// One chunk, then a crash (the updater's memory is lost).
	path := filepath.Join(t.TempDir(), "crashed.db")
	crashed, u := open(path)
	if err := u.Flush(); err != nil {
		t.Fatal(err)
	}
	if u.Pending() == 0 {
		t.Fatal("the first chunk took the whole inventory")
	}
	early, err := crashed.Hysteresis()
	if err != nil {
		t.Fatal(err)
	}
	var remembered int
	for key, b := range early {
		s, err := hysteresis.Decode(b)
		if err != nil {
			t.Fatalf("service %s: %v", key, err)
		}
		if len(s.Down) == 0 {
			t.Errorf("service %s with every member up was written before the last chunk", key)
		}
		remembered++
	}
	if remembered == 0 {
		t.Error("no service with members down was written with the first chunk")
	}
	crashed.Close()
	crashed, u = open(path)
	defer crashed.Close()
	flushAll(t, u)

	whole, wu := open(filepath.Join(t.TempDir(), "whole.db"))
	defer whole.Close()
	flushAll(t, wu)

	ha, err := crashed.Hysteresis()
	if err != nil {
		t.Fatal(err)
	}
	hb, err := whole.Hysteresis()
	if err != nil {
		t.Fatal(err)
	}
	if len(hb) <= remembered {
		t.Errorf("%d services stored, %d of them with the first chunk: none waited", len(hb), remembered)
	}
	if !maps.EqualFunc(ha, hb, bytes.Equal) {
		for key := range hb {
			if !bytes.Equal(ha[key], hb[key]) {
				t.Errorf("service %s after the crash:\n%s\nuninterrupted:\n%s", key, ha[key], hb[key])
				break
			}
		}
		t.Errorf("%d services after the crash, %d uninterrupted", len(ha), len(hb))
	}
	a, b := dump(t, crashed, hzZone), dump(t, whole, hzZone)
	if len(a) < len(inv.VMs) || !slices.Equal(a, b) {
		t.Errorf("%d names after the crash, %d uninterrupted; first difference: %v", len(a), len(b), firstDiff(a, b))
	}
}

// A backlog's full chunks are committed with the store's backlog signal
// open (another commit follows at once), and the signal always closes at
// the end of the backlog, so that serve builds the tables it put off:
// after the last chunk when it is partial (which says it is no part of
// the backlog while it lands: the tables are not built beside it), else
// once the drain is over. An aggregated source's parts never open it:
// drain takes the next part only after a part landed.
func TestBacklogEnds(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 60, Seed: 5})
	for i := range inv.VMs {
		delete(inv.VMs[i].Tags, "triton.cns.services") // no hysteresis state: chunks of VMs only
	}
	loadInventory := func(u *feeds.Updater) {
		load := *inv
		load.VMs = slices.Clone(inv.VMs)
		u.SetInventory(&load, "load")
	}
	var sourceVMs []db.VMChange
	sourceNames := map[string][]byte{}
	for i := range 60 {
		sourceNames[fmt.Sprintf("n%d.source.example.", i)] = []byte{}
		rr, err := dns.NewRR(fmt.Sprintf("n%d.%s. 30 IN A 10.0.0.1", i, hzZone))
		if err != nil {
			t.Fatal(err)
		}
		sourceVMs = append(sourceVMs, db.VMChange{UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Records: []db.Record{{Zone: hzZone, RR: rr}}})
	}
	loadSource := func(u *feeds.Updater) {
		const key = hzZone + "/source.example"
		names, vms := sourceNames, sourceVMs
		b := feeds.SourceBatch{Source: db.SourceUpdate{Source: key, State: []byte(`{"serial":1}`), Names: names}}
		b.N, b.VM = feeds.SourceVMs(vms)
		u.SetSource(b)
	}
	for _, tc := range []struct {
		name    string
		fill    func(*feeds.Updater)
		size    func(n int) int // the chunk for a backlog of n
		backlog []bool          // the signal during each commit
	}{
		{"one full chunk", loadInventory, func(n int) int { return n }, []bool{true}},
		{"a full chunk and a partial one", loadInventory, func(n int) int { return n - 1 }, []bool{true, false}},
		{"no chunks", loadInventory, func(n int) int { return n + 1 }, []bool{false}},
		{"a source larger than a chunk", loadSource, func(n int) int { return n / 3 }, []bool{false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, u := windowUpdater(t, time.Millisecond)
			tc.fill(u)
			end := store.Backlog().NextEnd()
			ended := func() bool {
				select {
				case <-end:
					return true
				default:
					return false
				}
			}
			endedEarly := atomic.Int64{} // commits whose hooks ran after the backlog ended
			store.OnCommit(func(*db.Committed) {
				if ended() {
					endedEarly.Add(1)
				}
			})
			_, backlog := backlogCommits(t, store, u, tc.size(u.Pending()))
			if !slices.Equal(backlog, tc.backlog) {
				t.Fatalf("the backlog signal during the commits: %v, want %v", backlog, tc.backlog)
			}
			if n := endedEarly.Load(); n > 0 {
				t.Errorf("%d of %d commits landed after the backlog ended", n, len(backlog))
			}
			if tc.backlog[0] {
				waitUntil(t, "the backlog's end", ended)
			}
		})
	}
}

// A backlog goes owner by owner: a zone's names sort by owner first, so
// each chunk writes the forward zone in runs (a first load appends), and
// a service's name is written with all its members at once. In UUID order
// every chunk would hold VMs of nearly every owner.
func TestBacklogChunksGoByOwner(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 300, Seed: 9})
	store, u := windowUpdater(t, time.Millisecond)
	u.SetInventory(inv, "load")

	// ownersOf returns the owners of a commit's forward names, from the
	// label after inst or svc.
	ownersOf := func(c *db.Committed) []string {
		var owners []string
		for _, z := range c.Zones {
			if z.Zone != hzZone {
				continue
			}
			for _, n := range z.Names {
				labels := strings.Split(db.WireToString(n.Owner), ".")
				for i := 1; i+1 < len(labels); i++ {
					if labels[i] == "inst" || labels[i] == "svc" {
						owners = append(owners, labels[i+1])
						break
					}
				}
			}
		}
		slices.Sort(owners)
		return slices.Compact(owners)
	}
	var chunks [][]string
	commits, _ := backlogCommits(t, store, u, 25)
	for _, c := range commits {
		if o := ownersOf(c); len(o) > 0 {
			chunks = append(chunks, o)
		}
	}
	if len(chunks) < 3 {
		t.Fatalf("%d chunks with names; the test wants a backlog of several", len(chunks))
	}
	// Owner ranges follow each other: a chunk starts at or after the last
	// owner of the one before (an owner with more VMs than a chunk spans
	// the boundary).
	for i := 1; i < len(chunks); i++ {
		if prev := chunks[i-1]; chunks[i][0] < prev[len(prev)-1] {
			t.Fatalf("chunk %d's owners %v start before chunk %d's end %v", i, chunks[i], i-1, prev)
		}
	}
}

// backlogCommits runs u's drain in chunks of size VMs until nothing is
// pending and the store's backlog signal is closed, and returns its
// commits with what the signal said during each.
func backlogCommits(t *testing.T, store *db.DB, u *feeds.Updater, size int) (commits []*db.Committed, backlog []bool) {
	t.Helper()
	var mu sync.Mutex
	store.OnCommit(func(c *db.Committed) { // the updater's commit goroutine
		mu.Lock()
		defer mu.Unlock()
		commits, backlog = append(commits, c), append(backlog, store.Backlog().IsOpen())
	})
	u.SetSizes(size, 0)
	running(t, u)
	waitUntil(t, "the backlog in", func() bool { return u.Pending() == 0 && !store.Backlog().IsOpen() })
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(commits), slices.Clone(backlog)
}

// A shutdown in the middle of a backlog commits nothing more: the chunk
// computed meanwhile is dropped (and logged), what landed stays, and the
// rest is still pending for the next start.
func TestShutdownDropsBacklog(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 1200, Seed: 7})
	var logs bytes.Buffer
	store, u := loggingUpdater(t, time.Millisecond, slog.NewJSONHandler(&logs, nil))
	u.SetSizes(150, 0)
	ctx, cancel := context.WithCancel(context.Background())
	var commits atomic.Int64
	store.OnCommit(func(*db.Committed) { // the updater's commit goroutine
		if commits.Add(1) == 1 {
			cancel()
		}
	})
	u.SetInventory(inv, "load")
	before := u.Pending() // the VMs and the compute nodes' names
	if err := u.Run(ctx); err != context.Canceled {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	hashes, err := store.VMHashes()
	if err != nil {
		t.Fatal(err)
	}
	if n := commits.Load(); n != 1 || len(hashes) != 150 {
		t.Errorf("after a shutdown in the first chunk's hook: %d commits, %d VMs stored; want 1 and 150", n, len(hashes))
	}
	if p := u.Pending(); p != before-150 {
		t.Errorf("%d pending, want the %d not committed", p, before-150)
	}
	if !strings.Contains(logs.String(), "batch not committed") {
		t.Errorf("no line for the dropped chunk:\n%s", logs.String())
	}
}

// Ensure a change after a big burst is committed like any other: the end
// of a burst of bigBurst VMs or more (a first load, a restart) starts the
// dirty set and its order afresh, so that they do not keep a million
// VMs' worth of memory.
func TestChangeAfterABigBurst(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 10500, Seed: 11})
	store, u := windowUpdater(t, time.Millisecond)
	u.SetInventory(inv, "load")
	for range 5 {
		if err := u.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if p := u.Pending(); p != 0 {
		t.Fatalf("%d pending after the load", p)
	}
	before := dump(t, store, hzZone)
	hashes, err := store.VMHashes()
	if err != nil {
		t.Fatal(err)
	}
	vm := inv.VMs[len(inv.VMs)/2]
	vm.State = "stopped"
	u.SetVM(&vm, "changefeed")
	if p := u.Pending(); p != 1 {
		t.Fatalf("%d pending after one change, want 1", p)
	}
	if err := u.Flush(); err != nil {
		t.Fatal(err)
	}
	after, err := store.VMHashes()
	if err != nil {
		t.Fatal(err)
	}
	zoneChanged := !slices.Equal(before, dump(t, store, hzZone))
	if u.Pending() != 0 || after[vm.UUID] == hashes[vm.UUID] || !zoneChanged {
		t.Errorf("the stopped VM was not committed: %d pending, hash %x -> %x, zone changed: %v",
			u.Pending(), hashes[vm.UUID], after[vm.UUID], zoneChanged)
	}
}
