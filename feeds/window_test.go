package feeds_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// The batch window spaces commits, it does not delay a lone change:
//   - at start, what the feeds list first gathers for one window (the
//     first commit holds the whole inventory, not half of it);
//   - the first change after a quiet spell is committed at once (well
//     before a window has passed);
//   - a change right after it waits until a window after that commit
//     began.
func TestBatchWindowCommitsAQuietChangeAtOnce(t *testing.T) {
	const window = time.Second
	store, u := windowUpdater(t, window)
	type commit struct {
		at    time.Time
		names int
		owner [][]byte
	}
	commits := make(chan commit, 64)
	store.OnCommit(func(c *db.Committed) {
		cm := commit{at: time.Now()}
		for _, z := range c.Zones {
			cm.names += len(z.Names)
			for _, n := range z.Names {
				cm.owner = append(cm.owner, n.Owner)
			}
		}
		commits <- cm
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { u.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// next returns the first commit within the time given that holds a
	// name containing label (any commit when label is empty): other
	// commits (the hysteresis state settling after the first listing)
	// may come between.
	next := func(within time.Duration, label, what string) commit {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case c := <-commits:
				if label == "" || slices.ContainsFunc(c.owner, func(o []byte) bool { return bytes.Contains(o, []byte(label)) }) {
					return c
				}
			case <-deadline:
				t.Fatalf("%s: no commit within %v", what, within)
				return commit{}
			}
		}
	}

	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 20, Seed: 3})
	u.SetInventory(inv, "load")
	if c := next(3*window, "", "start"); c.names < 20 {
		t.Fatalf("the first commit holds %d names: the inventory given at start did not gather into it", c.names)
	}

	time.Sleep(window) // the quiet spell itself, not a synchronisation
	// A VM destroyed: its names go, so the commit that carries it names
	// its UUID.
	destroy := func(i int) (time.Time, string) {
		at := time.Now()
		u.RemoveVM(inv.VMs[i].UUID, "destroyed")
		return at, inv.VMs[i].UUID
	}
	observed := u.LatencyHistogram().Count
	quiet, first := destroy(0)
	next(3*window, first, "a change after a quiet spell")
	// How long it waited for its drain: its latency less the store's
	// part, which on two loaded CPUs under -race can take a window by
	// itself. The commit's figures are set once its latency is counted.
	deadline := time.Now().Add(3 * window)
	lc := u.LastCommit()
	for ; u.LatencyHistogram().Count == observed || lc.VMs != 1; lc = u.LastCommit() {
		if time.Now().After(deadline) {
			t.Fatalf("the commit of the change after a quiet spell was not counted: %+v", lc)
		}
		time.Sleep(time.Millisecond) // polling the histogram: the commit's figures have no other signal
	}
	if lc.Oldest-lc.Duration >= window {
		t.Fatalf("a change after a quiet spell waited %v for its commit (which took %v), a whole window", lc.Oldest-lc.Duration, lc.Duration)
	}
	_, second := destroy(1)
	if c := next(3*window, second, "the next change"); c.at.Sub(quiet) < window {
		t.Fatalf("the next change was committed %v after the first one, inside the %v window", c.at.Sub(quiet), window)
	}
}
