package feeds_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// A backlog is committed in chunks, the next one computed while the last
// one commits; VMs that change meanwhile (some of them in the chunk being
// committed) end up as the same store a chunk-by-chunk Flush makes of the
// final inventory: every name, record and VM hash the same.
func TestDrainMatchesSerialFlush(t *testing.T) {
	defer feeds.SetMaxVMsPerCommit(150)()
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 1200, Seed: 7})
	rc, zc := hzConfig()

	open := func(name string) (*db.DB, *feeds.Updater) {
		store, err := db.Open(filepath.Join(t.TempDir(), name), db.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		u, err := feeds.NewUpdater(store, feeds.Options{Records: rc, Zones: zc, BatchWindow: time.Millisecond,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return store, u
	}

	// Run drains the backlog while VMs keep changing.
	piped, u := open("piped.db")
	var commits int
	piped.OnCommit(func(*db.Committed) { commits++ })
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
	if commits < len(inv.VMs)/150 {
		t.Errorf("%d commits for %d VMs in chunks of 150", commits, len(inv.VMs))
	}

	// The same final inventory, one Flush at a time.
	serial, su := open("serial.db")
	final := *inv
	su.SetInventory(&final, "load")
	for su.Pending() > 0 {
		if err := su.Flush(); err != nil {
			t.Fatal(err)
		}
	}

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
