package feeds_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin/metrics"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// The change latency histogram times each committed VM change from the
// moment the updater learnt of it to the end of the commit serving it:
//   - a first listing's VMs waited a batch window (the start gathers);
//   - a change after a quiet spell is served at once, one right after it
//     waits for the next window;
//   - a VM changed again while its commit is under way is timed from when
//     that commit's batch was computed, not from its first change.
func TestChangeLatency(t *testing.T) {
	const window = 500 * time.Millisecond
	store, u := windowUpdater(t, window)
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 20, Seed: 3})
	renamed := func(i int, alias string) *dc.VM {
		vm := inv.VMs[i]
		vm.Alias = &alias
		return &vm
	}
	// Once armed, the next commit changes VM 2 again from its hook, while
	// the commit is under way.
	var armed atomic.Bool
	store.OnCommit(func(*db.Committed) {
		if armed.CompareAndSwap(true, false) {
			u.SetVM(renamed(2, "second"), "test")
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { u.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// counted waits until the histogram holds n observations, at most ten
	// windows from start, and returns it.
	counted := func(what string, n uint64, start time.Time) metrics.Histogram {
		t.Helper()
		for h := u.LatencyHistogram(); ; h = u.LatencyHistogram() {
			if h.Count >= n {
				return h
			}
			if time.Since(start) > 10*window {
				t.Fatalf("%s: %d of %d observations after %v", what, h.Count, n, 10*window)
			}
			time.Sleep(time.Millisecond) // polling the histogram: commits have no other signal here
		}
	}
	// change makes a change and returns the histogram's one new
	// observation once it is committed, checked against the wall clock
	// since start (when the change was made at the latest), and how long
	// the store took to commit it. The bounds below leave the commit out:
	// on two loaded CPUs under -race, bbolt's part alone can take a
	// window; what they test is how long a change waited for its turn.
	var last metrics.Histogram
	change := func(what string, start time.Time, do func()) (time.Duration, time.Duration) {
		t.Helper()
		do()
		h := counted(what, last.Count+1, start)
		if n := h.Count - last.Count; n != 1 {
			t.Fatalf("%s: %d observations, want 1", what, n)
		}
		got := time.Duration((h.Sum - last.Sum) * float64(time.Second))
		if elapsed := time.Since(start); got <= 0 || got > elapsed {
			t.Fatalf("%s: latency %v, outside (0, %v]", what, got, elapsed)
		}
		last = h
		// The commit says how long its oldest change waited: this one.
		lc := u.LastCommit()
		if lc.VMs != 1 || (lc.Oldest-got).Abs() > time.Microsecond {
			t.Fatalf("%s: the last commit had %d VMs, its oldest change waited %v; want 1 and %v", what, lc.VMs, lc.Oldest, got)
		}
		return got, lc.Duration
	}

	start := time.Now()
	u.SetInventory(inv, "load")
	last = counted("the first listing", uint64(len(inv.VMs)), start)
	if below := countAtMost(last, window.Seconds()/5); below != 0 {
		t.Errorf("the first listing: %d of %d VMs served within %v; all waited a window", below, last.Count, window/5)
	}
	if elapsed := time.Since(start).Seconds(); last.Sum > float64(last.Count)*elapsed {
		t.Errorf("the first listing: latencies sum to %.2f s, more than %d × %.2f s", last.Sum, last.Count, elapsed)
	}

	time.Sleep(window) // the quiet spell itself, not a synchronisation
	if got, commit := change("a change after a quiet spell", time.Now(), func() { u.RemoveVM(inv.VMs[0].UUID, "destroyed") }); got-commit >= window/2 {
		t.Errorf("a change after a quiet spell: latency %v (%v of it the commit), want well under the %v window", got, commit, window)
	}
	if got, _ := change("the change right after it", time.Now(), func() { u.RemoveVM(inv.VMs[1].UUID, "destroyed") }); got < window/2 {
		t.Errorf("a change right after another: latency %v, want about the %v window", got, window)
	}
	again := time.Now()
	_, interrupted := change("a change made again during its commit", again, func() {
		armed.Store(true)
		u.SetVM(renamed(2, "first"), "test")
	})
	// The hook's change, timed from when the commit it interrupted was
	// computed: that commit, then the rest of a window (drains begin a
	// window apart), then its own commit. From the first change it would
	// be a window more.
	if got, commit := change("the change made during the commit", again, func() {}); got-commit > max(window, interrupted)+window/2 {
		t.Errorf("a VM changed again during its commit: latency %v (%v of it its commit, %v the commit it interrupted), counted from its earlier change", got, commit, interrupted)
	}
}

// countAtMost is how many observations of h were at most le (a bound of
// h's).
func countAtMost(h metrics.Histogram, le float64) uint64 {
	var n uint64
	for i, b := range h.Bounds {
		if b <= le {
			n = h.Counts[i]
		}
	}
	return n
}
