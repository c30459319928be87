package file

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/records"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// The guard on mass removals behind the inventory file feed: a bad deploy
// truncates the file to 30 % of its VMs.

const guardZone = "file.example.com"

type guardWorld struct {
	t     *testing.T
	path  string
	inv   *dc.Inventory
	mu    sync.Mutex
	now   time.Time
	store *db.DB
	u     *feeds.Updater
}

func (w *guardWorld) clock() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

func (w *guardWorld) advance(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = w.now.Add(d)
}

// newGuardWorld writes a 1,000-VM inventory and runs the file feed and
// an updater over it until it is committed.
func newGuardWorld(t *testing.T) *guardWorld {
	w := &guardWorld{t: t, path: filepath.Join(t.TempDir(), "inventory.json"), now: time.Now(),
		inv: sdcsim.Generate(sdcsim.GenerateOptions{VMs: 1000, Seed: 7})}
	w.write(w.inv.VMs)
	store, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	rc := records.Config{Zones: []records.Zone{{Name: guardZone, Networks: []string{"*"}}}}
	zc := db.ZoneConfig{Forward: map[string]db.Apex{guardZone: {MName: "ns." + guardZone + ".", RName: "hostmaster." + guardZone + ".",
		Refresh: 30, Retry: 60, Expire: 86400, Minimum: 30, SOATTL: 30, NS: []string{"ns." + guardZone + "."}, NSTTL: 3600}}}
	log := slog.New(slog.DiscardHandler)
	u, err := feeds.NewUpdater(store, feeds.Options{Records: rc, Zones: zc, Now: w.clock, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { u.Run(ctx) })
	wg.Go(func() { (&Feed{Path: w.path, Sink: u, Interval: 10 * time.Millisecond, Logger: log}).Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		store.Close()
	})
	w.store, w.u = store, u
	w.waitFor("the inventory to be committed", func() bool { return w.instances() == 1000 })
	return w
}

func (w *guardWorld) write(vms []dc.VM) {
	w.t.Helper()
	inv := *w.inv
	inv.VMs = vms
	b, err := json.Marshal(&inv)
	if err != nil {
		w.t.Fatal(err)
	}
	tmp := w.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, w.path); err != nil {
		w.t.Fatal(err)
	}
}

func (w *guardWorld) waitFor(what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !(w.u.Pending() == 0 && cond()) {
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s (guard %+v)", what, w.u.RemovalGuard().Holds)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// instances counts the VMs with a UUID name in the store.
func (w *guardWorld) instances() int {
	w.t.Helper()
	n := 0
	if _, ok, err := w.store.Zone(guardZone); err != nil || !ok {
		return 0 // not committed yet
	}
	err := w.store.ScanZone(guardZone, func(owner []byte, rrs db.RRs) error {
		name := db.WireToString(owner)
		if i := strings.Index(name, ".inst."); i == 36 && dc.IsUUID(name[:i]) {
			n++
		}
		return nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

func (w *guardWorld) held() (phase string, vms int) {
	for _, h := range w.u.RemovalGuard().Holds {
		if h.Cause == "unlisted" {
			return h.Phase, h.VMs
		}
	}
	return "", 0
}

// The file truncated to 30 % of its VMs is held: every VM keeps its
// names. The file put back releases the hold; nothing ever left.
func TestGuardInventoryTruncated(t *testing.T) {
	w := newGuardWorld(t)
	w.write(w.inv.VMs[:300])
	w.waitFor("the shrink to be held", func() bool { _, n := w.held(); return n == 700 })
	if n := w.instances(); n != 1000 {
		t.Fatalf("%d VMs keep their names while held, want 1000", n)
	}
	w.write(w.inv.VMs)
	w.waitFor("the hold to be released", func() bool { p, _ := w.held(); return p == "" })
	if n := w.instances(); n != 1000 {
		t.Errorf("%d VMs have names after the file was put back, want 1000", n)
	}
	var got []string
	for _, e := range w.u.RemovalGuard().History {
		got = append(got, e.Cause+" "+e.Action)
	}
	if want := []string{"unlisted held", "unlisted released"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// The file stays truncated past the confirmation period: the next check
// of the file confirms the shrink, and the VMs leave.
func TestGuardInventoryShrinkConfirmed(t *testing.T) {
	w := newGuardWorld(t)
	w.write(w.inv.VMs[:300])
	w.waitFor("the shrink to be held", func() bool { _, n := w.held(); return n == 700 })
	w.advance(9 * time.Minute)
	w.u.Tick()
	if p, _ := w.held(); p != "holding" || w.instances() != 1000 {
		t.Fatalf("inside the period: %s, %d VMs with names", p, w.instances())
	}
	w.advance(time.Minute)
	w.u.Tick() // the file is checked again meanwhile: fresh data after the period
	w.waitFor("the shrink to be applied", func() bool { return w.instances() == 300 })
	if p, _ := w.held(); p != "" {
		t.Errorf("after the confirmation the hold is %s", p)
	}
}
