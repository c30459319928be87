package feeds_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
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
	rc, zc := hzConfig()
	store, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	u, err := feeds.NewUpdater(store, feeds.Options{Records: rc, Zones: zc, BatchWindow: window,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	type commit struct {
		at    time.Time
		names int
	}
	commits := make(chan commit, 16)
	store.OnCommit(func(c *db.Committed) {
		n := 0
		for _, z := range c.Zones {
			n += len(z.Names)
		}
		commits <- commit{time.Now(), n}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { u.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	next := func(within time.Duration, what string) commit {
		t.Helper()
		select {
		case c := <-commits:
			return c
		case <-time.After(within):
			t.Fatalf("%s: no commit within %v", what, within)
			return commit{}
		}
	}

	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 20, Seed: 3})
	u.SetInventory(inv, "load")
	if c := next(3*window, "start"); c.names < 20 {
		t.Fatalf("the first commit holds %d names: the inventory given at start did not gather into it", c.names)
	}

	time.Sleep(window) // the quiet spell itself, not a synchronisation
	rename := func(i int) time.Time {
		vm := inv.VMs[i]
		alias := fmt.Sprintf("renamed-%d", i)
		vm.Alias = &alias
		at := time.Now()
		u.SetVM(&vm, "renamed")
		return at
	}
	quiet := rename(0)
	if c := next(window, "a change after a quiet spell"); c.at.Sub(quiet) >= window {
		t.Fatalf("a change after a quiet spell waited %v, a whole window", c.at.Sub(quiet))
	}
	rename(1)
	if c := next(3*window, "the next change"); c.at.Sub(quiet) < window {
		t.Fatalf("the next change was committed %v after the first one, inside the %v window", c.at.Sub(quiet), window)
	}
}
