package feeds_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/guard"
	"github.com/tritondatacenter/cns/feeds/records"
	"github.com/tritondatacenter/cns/feeds/sdc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// The guard on mass removals against the SDC simulator: the real feed
// over HTTP, WebSocket and LDAP, the updater on a store, its clock
// driven by the test (no minutes waited), at the default policy. A data
// center of 1,000 VMs on 20 compute nodes and 40 accounts.

const gzZone = "guard.example.com"

// gzWorld is the simulator and the cns (store, updater, SDC feed)
// watching it.
type gzWorld struct {
	t     *testing.T
	sim   *sdcsim.Sim
	path  string
	clock *fakeClock
	logs  *logBuffer
	store *db.DB
	u     *feeds.Updater
	feed  *sdc.Feed
	stop  func()
}

func newGZWorld(t *testing.T) *gzWorld {
	t.Helper()
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 1000, Seed: 43, VMsPerCN: 50, VMsPerOwner: 25})
	sim, err := sdcsim.New(*inv, sdcsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sim.Close(); err != nil {
			t.Error(err)
		}
	})
	w := &gzWorld{t: t, sim: sim, path: filepath.Join(t.TempDir(), "cns.db"), clock: &fakeClock{t: time.Now()}, logs: &logBuffer{}}
	w.start()
	return w
}

// start opens the store and runs an updater and an SDC feed on it, as
// cns serve does, and waits for the first listing to be committed.
func (w *gzWorld) start() {
	w.t.Helper()
	store, err := db.Open(w.path, db.Options{NoSync: true})
	if err != nil {
		w.t.Fatal(err)
	}
	rc := records.Config{Zones: []records.Zone{{Name: gzZone, Networks: []string{"*"}}}, UseAlias: true}
	apex := db.Apex{MName: "ns." + gzZone + ".", RName: "hostmaster." + gzZone + ".",
		Refresh: 30, Retry: 60, Expire: 86400, Minimum: 30, SOATTL: 30, NS: []string{"ns." + gzZone + "."}, NSTTL: 3600}
	zc := db.ZoneConfig{Forward: map[string]db.Apex{gzZone: apex}, Reverse: apex}
	log := slog.New(slog.NewJSONHandler(w.logs, nil))
	u, err := feeds.NewUpdater(store, feeds.Options{Records: rc, Zones: zc, Now: w.clock.Now, Logger: log})
	if err != nil {
		w.t.Fatal(err)
	}
	raw := func(k string) json.RawMessage {
		b, err := json.Marshal(w.sim.Config()[k])
		if err != nil {
			w.t.Fatal(err)
		}
		return b
	}
	ep, err := sdc.ParseEndpoints(raw("vmapi_opts"), raw("cnapi_opts"), raw("napi_opts"), raw("ufds_opts"), raw("changefeed_opts"))
	if err != nil {
		w.t.Fatal(err)
	}
	feed, err := sdc.NewFeed(sdc.Config{Endpoints: ep, FullPollInterval: time.Hour, FallbackPollInterval: time.Hour, ReaperInterval: time.Hour,
		CNAPIInterval: 50 * time.Millisecond, NAPIInterval: time.Second, UFDSInterval: 50 * time.Millisecond,
		PingInterval: 100 * time.Millisecond, PongTimeout: 2 * time.Second, RequestTimeout: 5 * time.Second,
		RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond, Logger: log}, u)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { u.Run(ctx) })
	wg.Go(func() { feed.Run(ctx) })
	stopped := false
	w.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
			store.Close()
		}
	}
	w.t.Cleanup(w.stop)
	w.store, w.u, w.feed = store, u, feed
	w.waitFor("the first listing to be committed", func() bool { return feed.Status().FullSyncs > 0 && w.idle() })
}

// restart stops cns and starts it again on the same store.
func (w *gzWorld) restart() {
	w.t.Helper()
	w.stop()
	w.start()
}

func (w *gzWorld) idle() bool { return w.u.Pending() == 0 && w.feed.Status().Pending == 0 }

func (w *gzWorld) waitFor(what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s (guard %+v)", what, w.u.RemovalGuard().Holds)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// names returns every record of the zone, apex excluded, as text.
func (w *gzWorld) names() []string {
	w.t.Helper()
	var out []string
	err := w.store.ScanZone(gzZone, func(owner []byte, rrs db.RRs) error {
		name := db.WireToString(owner)
		if name == gzZone+"." {
			return nil
		}
		list, err := rrs.ToRR(name)
		for _, rr := range list {
			out = append(out, rr.String())
		}
		return err
	})
	if err != nil {
		w.t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// services counts the service names' address records.
func (w *gzWorld) services() int {
	n := 0
	for _, r := range w.names() {
		if strings.Contains(r, ".svc.") && strings.Contains(r, "\tA\t") {
			n++
		}
	}
	return n
}

// hold returns the hold of cause, if any.
func (w *gzWorld) hold(cause guard.Cause) (status.RemovalHold, bool) {
	for _, h := range w.u.RemovalGuard().Holds {
		if h.Cause == string(cause) {
			return h, true
		}
	}
	return status.RemovalHold{}, false
}

// events returns the guard's history as "cause action" lines.
func (w *gzWorld) events() []string {
	var out []string
	for _, e := range w.u.RemovalGuard().History {
		out = append(out, e.Cause+" "+e.Action)
	}
	return out
}

// cnapiAnswered waits for the feed's next CNAPI answer to be applied:
// the updater's poll count of compute nodes goes up twice (a whole poll
// after now).
func (w *gzWorld) cnapiAnswered() {
	w.t.Helper()
	n := w.sim.Requests(sdcsim.RouteListServers)
	w.waitFor("CNAPI to be asked twice more", func() bool { return w.sim.Requests(sdcsim.RouteListServers) >= n+2 })
	w.waitFor("the updater to commit", w.idle)
}

// relist makes the feed list everything again (a changefeed
// re-bootstrap) and waits for a listing begun since to be committed: one
// begun before (under load, the start's second listing may still be
// under way) may predate what the test changed.
func (w *gzWorld) relist() {
	w.t.Helper()
	asked := time.Now()
	w.sim.DropFeeds(sdcsim.DropClose)
	w.waitFor("a full listing begun now", func() bool {
		s := w.feed.Status()
		return s.LastFullSync.Add(-s.LastFullSyncTook).After(asked) && w.idle()
	})
}

// allCNs applies fn to every compute node but those except names, with
// CNAPI answering 503 meanwhile: its next answer has them all (one poll,
// as a CNAPI restart brings).
func (w *gzWorld) allCNs(fn func(srv *dc.Server), except ...string) {
	w.t.Helper()
	w.sim.SetFault(sdcsim.RouteListServers, sdcsim.Fault{Status: 503})
	for _, s := range w.sim.Inventory().Servers {
		if slices.Contains(except, s.UUID) {
			continue
		}
		if err := w.sim.ModifyServer(s.UUID, fn); err != nil {
			w.t.Fatal(err)
		}
	}
	w.sim.ClearFault(sdcsim.RouteListServers)
}

// cnDown is CNAPI after a restart with stale heartbeats: status unknown,
// last heard from two hours ago.
func cnDown(srv *dc.Server) {
	hb := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339Nano)
	srv.Status, srv.LastHeartbeat = "unknown", &hb
}

// cnUp is CNAPI answering right again (the CNs never rebooted).
func cnUp(srv *dc.Server) {
	hb := time.Now().UTC().Format(time.RFC3339Nano)
	srv.Status, srv.LastHeartbeat = "running", &hb
}

func (w *gzWorld) logLines(msg string) int {
	return strings.Count(w.logs.String(), `"msg":"`+msg)
}

// logBuffer is a log sink safe for concurrent writers.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// CNAPI reports every compute node down for two minutes, then right
// again: no name leaves, one alarm is raised (an error line, a hold),
// and it clears.
func TestGuardCNAPIAllDownThenBack(t *testing.T) {
	w := newGZWorld(t)
	before := w.names()
	if w.services() < 400 {
		t.Fatalf("only %d service records: the data center is not what the test needs", w.services())
	}
	w.allCNs(cnDown)
	w.waitFor("the removals to be held", func() bool { _, ok := w.hold(guard.CNDown); return ok })
	w.cnapiAnswered()
	for range 4 { // two minutes of CNAPI polls
		w.clock.Advance(30 * time.Second)
		w.u.Tick()
		w.cnapiAnswered()
		if h, ok := w.hold(guard.CNDown); !ok || h.Phase != string(guard.Holding) || h.VMs < 400 {
			t.Fatalf("at %v the hold is %+v", w.clock.Now(), h)
		}
		if got := w.names(); !slices.Equal(got, before) {
			t.Fatalf("names left while held: %d records, was %d", len(got), len(before))
		}
	}
	if n := w.logLines("removals held"); n != 1 {
		t.Errorf("%d error lines for the hold, want 1", n)
	}
	if n := w.u.HeldRemovals()["cn_down"]; n < 400 {
		t.Errorf("the metric says %d VMs held", n)
	}
	w.allCNs(cnUp)
	w.waitFor("the hold to clear", func() bool { _, ok := w.hold(guard.CNDown); return !ok })
	w.waitFor("the updater to commit", w.idle)
	if got := w.names(); !slices.Equal(got, before) {
		t.Errorf("after the recovery %d records, was %d", len(got), len(before))
	}
	if n := w.u.HeldRemovals()["cn_down"]; n != 0 {
		t.Errorf("after the recovery the metric says %d VMs held", n)
	}
	if got, want := w.events(), []string{"cn_down held", "cn_down released"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if !strings.Contains(w.logs.String(), `"level":"ERROR","msg":"removals held`) || w.logLines("held removals released") != 1 {
		t.Errorf("the log does not say held (an error) then released once:\n%s", w.logs.String())
	}
}

// One compute node of 20 going down leaves its VMs' service names at
// once, with no alarm.
func TestGuardOneCNDownApplies(t *testing.T) {
	w := newGZWorld(t)
	before := w.services()
	cn := w.sim.Inventory().Servers[0].UUID
	if err := w.sim.ModifyServer(cn, cnDown); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the CN's VMs to leave their services", func() bool { return w.idle() && w.services() < before })
	w.cnapiAnswered()
	if got := w.events(); len(got) != 0 {
		t.Errorf("events %q, want none", got)
	}
}

// A tenant destroys 500 VMs: each is confirmed by VMAPI, all leave, and
// the guard raises nothing.
func TestGuardTenantDestroys500(t *testing.T) {
	w := newGZWorld(t)
	var doomed []string
	owner := ""
	for _, vm := range w.sim.Inventory().VMs {
		if owner == "" {
			owner = vm.OwnerUUID
		}
		if len(doomed) < 500 {
			doomed = append(doomed, vm.UUID)
		}
	}
	// One tenant's 500 VMs: give them to the first VM's owner.
	for _, id := range doomed {
		if err := w.sim.ModifyVM(id, func(vm *dc.VM) { vm.OwnerUUID = owner }); err != nil {
			t.Fatal(err)
		}
	}
	w.waitFor("the owner change", func() bool { return w.idle() && w.instanceNames(doomed[499]) > 0 })
	for _, id := range doomed {
		if err := w.sim.DestroyVM(id); err != nil {
			t.Fatal(err)
		}
	}
	w.waitFor("the 500 VMs to leave", func() bool {
		if !w.idle() {
			return false
		}
		for _, id := range doomed {
			if w.instanceNames(id) > 0 {
				return false
			}
		}
		return true
	})
	if got := w.events(); len(got) != 0 {
		t.Errorf("events %q, want none", got)
	}
}

// instances counts the VMs with instance names.
func (w *gzWorld) instances() int {
	vms := map[string]bool{}
	for _, r := range w.names() {
		if i := strings.Index(r, ".inst."); i > 0 && !strings.Contains(r[:i], ".") {
			vms[r[:i]] = true
		}
	}
	return len(vms)
}

// instanceNames counts the records at vm's UUID names.
func (w *gzWorld) instanceNames(vm string) int {
	n := 0
	for _, r := range w.names() {
		if strings.HasPrefix(r, vm+".inst.") {
			n++
		}
	}
	return n
}

// A real shrink: 600 VMs vanish from VMAPI without a destroy event (a
// moray index fault looks the same). The listing that misses them is
// held; the listings during the period change nothing; the first
// listing after the period confirms it: they leave, and the log says so.
func TestGuardShortListingConfirmed(t *testing.T) {
	w := newGZWorld(t)
	vms := w.sim.Inventory().VMs
	gone := vms[:600]
	for _, vm := range gone {
		if err := w.sim.PurgeVM(vm.UUID); err != nil {
			t.Fatal(err)
		}
	}
	before := w.names()
	w.relist()
	h, ok := w.hold(guard.Unlisted)
	if !ok || h.VMs != 600 {
		t.Fatalf("after the short listing the hold is %+v (%v), want 600 VMs held", h, ok)
	}
	if got := w.names(); !slices.Equal(got, before) {
		t.Fatalf("names left at once: %d records, was %d", len(got), len(before))
	}
	w.clock.Advance(5 * time.Minute)
	w.relist()
	if got := w.names(); !slices.Equal(got, before) {
		t.Fatalf("names left inside the period: %d records, was %d", len(got), len(before))
	}
	w.clock.Advance(5 * time.Minute)
	w.u.Tick()
	if h, _ := w.hold(guard.Unlisted); h.Phase != string(guard.Confirming) {
		t.Fatalf("after the period the hold is %+v, want confirming", h)
	}
	w.relist()
	w.waitFor("the hold to end", func() bool { _, ok := w.hold(guard.Unlisted); return !ok && w.idle() })
	for _, vm := range gone {
		if n := w.instanceNames(vm.UUID); n > 0 {
			t.Fatalf("VM %s still has %d records after the confirmation", vm.UUID, n)
		}
	}
	if got, want := w.events(), []string{"unlisted held", "unlisted confirmed"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if !strings.Contains(w.logs.String(), `"msg":"held removals applied","cause":"unlisted","action":"confirmed","vms":600`) {
		t.Errorf("no log line for the confirmation:\n%s", w.logs.String())
	}
}

// A short listing followed by a whole one: nothing leaves, the hold is
// released.
func TestGuardShortListingRecovers(t *testing.T) {
	w := newGZWorld(t)
	vms := w.sim.Inventory().VMs[:600]
	for _, vm := range vms {
		if err := w.sim.PurgeVM(vm.UUID); err != nil {
			t.Fatal(err)
		}
	}
	before := w.names()
	w.relist()
	if _, ok := w.hold(guard.Unlisted); !ok {
		t.Fatal("the short listing was not held")
	}
	if got := w.names(); !slices.Equal(got, before) {
		t.Fatalf("names left at once: %d records, was %d", len(got), len(before))
	}
	w.putBack(vms, before)
}

// putBack puts vms back in VMAPI and relists: the hold of the listing
// that missed them is released, and the zone is before again.
func (w *gzWorld) putBack(vms []dc.VM, before []string) {
	w.t.Helper()
	for _, vm := range vms {
		if err := w.sim.PutVM(vm); err != nil {
			w.t.Fatal(err)
		}
	}
	w.relist()
	w.waitFor("the hold to be released", func() bool { _, ok := w.hold(guard.Unlisted); return !ok && w.idle() })
	if got := w.names(); !slices.Equal(got, before) {
		w.t.Errorf("after the whole listing %d records, was %d", len(got), len(before))
	}
}

// UFDS answers every account without triton_cns_enabled: held; the
// operator accepts early: the names leave at once.
func TestGuardOwnersOffAccepted(t *testing.T) {
	w := newGZWorld(t)
	inv := w.sim.Inventory()
	w.sim.SetFault(sdcsim.RouteLDAPSearch, sdcsim.Fault{LDAPResult: 51})
	for _, usr := range inv.Users {
		if err := w.sim.SetUserFlag(usr.UUID, "triton_cns_enabled", "false"); err != nil {
			t.Fatal(err)
		}
	}
	w.sim.ClearFault(sdcsim.RouteLDAPSearch)
	w.waitFor("the removals to be held", func() bool { h, ok := w.hold(guard.OwnerOff); return ok && h.VMs > 700 && w.idle() })
	if n := w.instances(); n < 700 {
		t.Fatalf("only %d instances keep names while held", n)
	}
	w.clock.Advance(time.Minute)
	n, err := w.u.AcceptRemovals("")
	if err != nil || n < 700 {
		t.Fatalf("accept: %d VMs, %v", n, err)
	}
	w.waitFor("the names to leave", func() bool { return w.idle() && w.instances() == 0 })
	if got := w.events(); !slices.Equal(got, []string{"owner_off held", "owner_off accepted"}) {
		t.Errorf("events %q", got)
	}
}

// A restart during a hold keeps it: the names stay, the hold is there
// after the restart, and it clears when CNAPI recovers.
func TestGuardRestartDuringHold(t *testing.T) {
	w := newGZWorld(t)
	before := w.names()
	w.allCNs(cnDown)
	w.waitFor("the removals to be held", func() bool { _, ok := w.hold(guard.CNDown); return ok && w.idle() })
	held, _ := w.hold(guard.CNDown)
	w.clock.Advance(time.Minute)
	w.restart()
	w.cnapiAnswered()
	if h, ok := w.hold(guard.CNDown); !ok || h.VMs != held.VMs || !h.Since.Equal(held.Since) {
		t.Fatalf("after the restart the hold is %+v (%v), was %+v", h, ok, held)
	}
	if n := w.logLines("removals held"); n != 1 {
		t.Errorf("%d error lines for the hold, want 1: the restart raised it again", n)
	}
	if got := w.names(); !slices.Equal(got, before) {
		t.Fatalf("names left across the restart: %d records, was %d", len(got), len(before))
	}
	if got := w.events(); !slices.Equal(got, []string{"cn_down held"}) {
		t.Errorf("events %q: the restart raised the alarm again", got)
	}
	w.allCNs(cnUp)
	w.waitFor("the hold to clear", func() bool { _, ok := w.hold(guard.CNDown); return !ok && w.idle() })
	if got := w.names(); !slices.Equal(got, before) {
		t.Errorf("after the recovery %d records, was %d", len(got), len(before))
	}
}
