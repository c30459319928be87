package feeds_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// With LoadLater, NewUpdater reads nothing: the entry points that need the
// stored VMs wait for Run to read them, while the ones that only report
// answer at once. Once Run has read them, a full listing removes a stored
// VM that is gone, as it does when NewUpdater reads them.
func TestLoadLater(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 40, Seed: 3})
	rc, zc := hzConfig()
	store, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	opts := feeds.Options{Records: rc, Zones: zc, BatchWindow: time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	first, err := feeds.NewUpdater(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	all := *inv
	first.SetInventory(&all, "load")
	flushAll(t, first)
	stored, err := store.VMHashes()
	if err != nil || len(stored) == 0 {
		t.Fatalf("stored VMs: %d, %v", len(stored), err)
	}

	opts.LoadLater = true
	u, err := feeds.NewUpdater(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	uuids := make(chan []string, 1)
	go func() { uuids <- u.VMUUIDs() }()
	u.ReportFeed("test", errors.New("down")) // does not wait for Run
	if f := u.Feeds(); len(f) != 1 || f[0].Healthy {
		t.Errorf("feeds before Run: %+v", f)
	}
	select {
	case got := <-uuids:
		t.Fatalf("VMUUIDs answered before Run read the store: %d VMs", len(got))
	case <-time.After(50 * time.Millisecond):
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { u.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	got := <-uuids
	if len(got) != len(stored) {
		t.Errorf("VMUUIDs after Run: %d, the store holds %d", len(got), len(stored))
	}

	gone := slices.Sorted(func(yield func(string) bool) {
		for id := range stored {
			if !yield(id) {
				return
			}
		}
	})[0]
	rest := *inv
	rest.VMs = slices.DeleteFunc(slices.Clone(inv.VMs), func(vm dc.VM) bool { return vm.UUID == gone })
	u.SetInventory(&rest, "listing")
	deadline := time.Now().Add(10 * time.Second)
	for {
		now, err := store.VMHashes()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := now[gone]; !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("VM %s, gone from the listing, is still stored", gone)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
