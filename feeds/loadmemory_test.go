package feeds_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/records"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// firstLoadHeapPerVM bounds the live heap a first load adds at its peak,
// per VM loaded: the updater's model of the data center, the chunk being
// committed (its records, names, journal entry, bbolt's dirty nodes and
// pages) and the next one being computed. The load below measures
// 1,310–1,480 bytes a VM (20k VMs in chunks scaled from the 100k load's);
// before the prepared records were slimmed and the chunks halved, ~2,750. The
// collector lets the heap grow to about twice its live size, so this
// bounds the process's peak too (a 100k-VM first load's, measured in
// BENCHMARKS.md, "Memory of a first load", is what the 1 GiB package
// has to hold).
const firstLoadHeapPerVM = 2400

// A first load's peak live heap stays proportional to its VMs and within
// firstLoadHeapPerVM of them. The collector runs at GOGC=10 meanwhile, so
// the live heap it reports at the end of each cycle follows the true one
// closely (a cycle every 10 % of growth) whatever the machine's speed.
func TestFirstLoadPeakHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("a 20k-VM first load at GOGC=10 (tens of CPU seconds): the full run's, not -short's")
	}
	const vms = 20000
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: vms, Seed: 20240611})
	apex := db.Apex{MName: "ns1.cns.example.", RName: "hostmaster.cns.example.", Refresh: 30, Retry: 60,
		Expire: 86400, Minimum: 30, SOATTL: 30, NS: []string{"ns1.cns.example."}, NSTTL: 3600}
	store, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	u, err := feeds.NewUpdater(store, feeds.Options{
		Records: records.Config{Zones: []records.Zone{{Name: "dc.cns.example", Networks: []string{"*"}}}, ReverseV4Prefix: 8},
		Zones:   db.ZoneConfig{Forward: map[string]db.Apex{"dc.cns.example": apex}, Reverse: apex},
		Logger:  slog.New(slog.DiscardHandler), BatchWindow: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	u.SetSizes(2000, 0) // the 100k-VM load's chunks (10,000 to 12,500) scaled to 20k VMs
	commits := 0
	store.OnCommit(func(c *db.Committed) { commits++ })

	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	before := liveHeap()
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			peak = max(peak, liveHeap())
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { u.Run(ctx); close(done) }()
	u.SetInventory(inv, "load")
	deadline := time.Now().Add(5 * time.Minute)
	for u.Pending() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still %d pending after 5 minutes", u.Pending())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	close(stop)
	wg.Wait()
	if commits < vms/(3*2000) {
		t.Fatalf("%d commits: not a load in chunks", commits)
	}
	perVM := float64(peak-min(before, peak)) / vms
	t.Logf("first load of %d VMs in %d commits: live heap at most %.1f MiB above the %.1f MiB before, %.0f bytes a VM",
		vms, commits, float64(peak-min(before, peak))/(1<<20), float64(before)/(1<<20), perVM)
	if perVM > firstLoadHeapPerVM {
		t.Fatalf("a first load's live heap peaked at %.0f bytes a VM, more than %d", perVM, firstLoadHeapPerVM)
	}
}

// liveHeap is the heap the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
