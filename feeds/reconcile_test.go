package feeds_test

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// byOwner returns inv's VMs in the order a backlog takes them: the dirty
// set goes by owner, then UUID.
func byOwner(inv *dc.Inventory) []dc.VM {
	return slices.SortedFunc(slices.Values(inv.VMs), func(a, b dc.VM) int {
		return cmp.Or(cmp.Compare(a.OwnerUUID, b.OwnerUUID), cmp.Compare(a.UUID, b.UUID))
	})
}

// byOwnerLast returns the VM a backlog takes last.
func byOwnerLast(inv *dc.Inventory) dc.VM {
	vms := byOwner(inv)
	return vms[len(vms)-1]
}

// stopped returns vm, stopped.
func stopped(vm dc.VM) *dc.VM {
	vm.State = "stopped"
	return &vm
}

// restarted loads inv into a fresh store, then returns the store and an
// updater started on it afresh (a restart, logging to log) that has been
// given inv again: every VM dirty, to be found as stored.
func restarted(t *testing.T, inv *dc.Inventory, log slog.Handler) (*db.DB, *feeds.Updater) {
	t.Helper()
	store, u := windowUpdater(t, time.Millisecond)
	u.SetInventory(inv, "load")
	flushAll(t, u)
	rc, zc := hzConfig()
	again, err := feeds.NewUpdater(store, feeds.Options{Records: rc, Zones: zc, BatchWindow: time.Millisecond, Logger: slog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	again.SetInventory(inv, "restart")
	return store, again
}

// backlogAfterAChunk starts a first load of 300 VMs in chunks of 25 (for
// the rest of the test) and commits its first chunk.
func backlogAfterAChunk(t *testing.T) (*dc.Inventory, *db.DB, *feeds.Updater) {
	t.Helper()
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 300, Seed: 9})
	store, u := windowUpdater(t, time.Millisecond)
	u.SetSizes(25, 0)
	u.SetInventory(inv, "load")
	if err := u.Flush(); err != nil {
		t.Fatal(err)
	}
	return inv, store, u
}

// backlogFlags collects, from now on, what the store's backlog signal
// says of each of its commits (db.Backlog: open while its hooks run).
func backlogFlags(store *db.DB) *[]bool {
	var flags []bool
	store.OnCommit(func(*db.Committed) { flags = append(flags, store.Backlog().IsOpen()) })
	return &flags
}

// A change that comes while a backlog is being committed (a first load in
// chunks) is committed next, on its own, not after the rest of the
// backlog; its commit says that the backlog goes on (serve builds the
// zones' tables once, at its end).
func TestChangeDuringABacklogGoesFirst(t *testing.T) {
	inv, store, u := backlogAfterAChunk(t)
	last := byOwnerLast(inv)
	u.SetVM(stopped(last), "changefeed")
	backlog := backlogFlags(store)
	if err := u.Flush(); err != nil {
		t.Fatal(err)
	}
	hashes := storedHashes(t, store)
	if _, ok := hashes[last.UUID]; !ok || len(hashes) != 26 || !slices.Equal(*backlog, []bool{true}) {
		t.Errorf("after a chunk of 25 and the change: %d VMs stored (want 26), the changed one (the backlog's last) stored: %v; says more of the backlog follows: %v",
			len(hashes), ok, *backlog)
	}
	if err := u.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := storedVMs(t, store); n != 51 {
		t.Errorf("the backlog's next chunk: %d VMs stored, want 51", n)
	}
}

// A restart's reconcile goes in slices, letting go of the updater between
// them: a change the feeds bring meanwhile is committed with the next
// slice, while the rest of the reconcile is still to come, and the
// reconcile then ends writing nothing else.
func TestReconcileLetsChangesIn(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 600, Seed: 9})
	store, u := restarted(t, inv, slog.DiscardHandler)
	before, err := store.VMHashes()
	if err != nil {
		t.Fatal(err)
	}
	u.SetSizes(0, 50)
	last := byOwnerLast(inv)
	cuts := 0
	u.SetBetweenSlices(func() {
		if cuts++; cuts == 1 {
			u.SetVM(stopped(last), "changefeed") // takes the updater's lock
		}
	})
	backlog := backlogFlags(store)
	// The first commit holds the zone config (a restart writes it) and
	// the first slice; the change comes after it, with the second.
	var after map[string]uint64
	for range 2 {
		if err := u.Flush(); err != nil {
			t.Fatal(err)
		}
		if after, err = store.VMHashes(); err != nil {
			t.Fatal(err)
		}
	}
	if after[last.UUID] == before[last.UUID] || u.Pending() < 450 {
		t.Fatalf("after %d slices: the change is stored: %v, %d VMs pending (the reconcile's rest: want 450 or more)",
			cuts, after[last.UUID] != before[last.UUID], u.Pending())
	}
	flushAll(t, u)
	final, err := store.VMHashes()
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(final, after) {
		t.Error("the reconcile's rest changed the stored VMs")
	}
	if cuts < 600/50-3 { // the two committed slices and the last call no hook
		t.Errorf("%d slices found nothing to commit, want %d", cuts, 600/50-3)
	}
	if slices.Contains(*backlog, true) { // (the served tables stay)
		t.Errorf("a reconcile's commits said a backlog's chunk follows: %v", *backlog)
	}
}

// Run drains a reconcile in slices too, a slice that found changed VMs
// committed while the next is computed, and stores what a single Flush of
// the same listing stores.
func TestReconcileSlicesUnderRun(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 600, Seed: 9})
	changed := *inv
	changed.VMs = slices.Clone(inv.VMs)
	for i := 0; i < len(changed.VMs); i += 37 {
		changed.VMs[i] = *stopped(changed.VMs[i])
	}
	last := byOwnerLast(&changed)
	for i := range changed.VMs {
		if changed.VMs[i].UUID == last.UUID {
			changed.VMs[i] = *stopped(last) // the last commit is the reconcile's end
		}
	}

	whole, wu := restarted(t, inv, slog.DiscardHandler)
	wu.SetInventory(&changed, "relisting")
	flushAll(t, wu)
	want, err := whole.VMHashes()
	if err != nil {
		t.Fatal(err)
	}

	store, u := restarted(t, inv, slog.DiscardHandler)
	u.SetSizes(0, 50)
	u.SetInventory(&changed, "relisting")
	var commits atomic.Int64
	store.OnCommit(func(*db.Committed) { commits.Add(1) })
	running(t, u)
	// (A commit's hook runs before the updater settles its VMs: waiting
	// for one more commit while the last is settling waited forever.)
	settled(t, u)
	n := commits.Load()
	got, err := store.VMHashes()
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) || n < 2 {
		t.Errorf("%d commits; the stored VMs differ from a single flush's: %v", n, !maps.Equal(got, want))
	}
}

// Changes that keep coming during a backlog do not hold it up: each is
// committed out of turn, but a chunk of the backlog follows each such
// commit.
func TestBacklogGoesOnUnderChanges(t *testing.T) {
	inv, store, u := backlogAfterAChunk(t)
	for i := range 6 {
		u.SetVM(stopped(inv.VMs[i]), "changefeed")
		if err := u.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	hashes := storedHashes(t, store)
	if len(hashes) < 25+3*25 {
		t.Errorf("after the first chunk and 6 commits under changes: %d VMs stored, want %d or more", len(hashes), 25+3*25)
	}
}

// A reconcile that finds every VM as stored, in slices under Run, ends
// with a "committed" line that says so: across its lines every stored VM
// is counted once as unchanged, and the last has nothing pending.
func TestReconcileEndIsLogged(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 600, Seed: 9})
	var logs syncBuffer
	store, u := restarted(t, inv, slog.NewJSONHandler(&logs, nil))
	u.SetSizes(0, 50)
	hashes := storedHashes(t, store)
	running(t, u)
	settled(t, u) // (the last line is written before the lock is let go)
	var total, lines int
	var last map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil || m["msg"] != "committed" {
			continue
		}
		lines++
		total += int(m["unchanged"].(float64))
		last = m
	}
	if total != len(hashes) || last == nil || last["pending"].(float64) != 0 {
		t.Errorf("%d committed lines count %d VMs as unchanged (want the %d stored), the last: %v", lines, total, len(hashes), last)
	}
}

// firstLoadInSlices starts a first load of 300 VMs in chunks of 100,
// computed in slices of 30 (for the rest of the test), logging to log;
// during the first chunk's computation, between its first two slices, it
// runs f. hooks counts the times the updater was let go between slices.
func firstLoadInSlices(t *testing.T, log slog.Handler, f func(*feeds.Updater)) (inv *dc.Inventory, store *db.DB, u *feeds.Updater, hooks *int) {
	t.Helper()
	inv = sdcsim.Generate(sdcsim.GenerateOptions{VMs: 300, Seed: 9})
	store, u = loggingUpdater(t, time.Millisecond, log)
	u.SetSizes(100, 30)
	u.SetInventory(inv, "load")
	hooks = new(int)
	u.SetBetweenSlices(func() {
		if *hooks++; *hooks == 1 {
			f(u) // takes the updater's lock
		}
	})
	return inv, store, u, hooks
}

// storedHashes returns the VMs store holds, with their digests.
func storedHashes(t *testing.T, store *db.DB) map[string]uint64 {
	t.Helper()
	hashes, err := store.VMHashes()
	if err != nil {
		t.Fatal(err)
	}
	return hashes
}

// storedVMs returns how many VMs store holds.
func storedVMs(t *testing.T, store *db.DB) int {
	t.Helper()
	return len(storedHashes(t, store))
}

// A first load's chunk is computed in slices, letting go of the updater
// between them: a change the feeds bring meanwhile is committed first, on
// its own, and the chunk then goes on where it was.
func TestFirstLoadLetsChangesIn(t *testing.T) {
	var last dc.VM
	inv, store, u, hooks := firstLoadInSlices(t, slog.DiscardHandler, func(u *feeds.Updater) {
		u.SetVM(stopped(last), "changefeed")
	})
	last = byOwnerLast(inv)
	backlog := backlogFlags(store)
	if err := u.Flush(); err != nil {
		t.Fatal(err)
	}
	hashes := storedHashes(t, store)
	if _, ok := hashes[last.UUID]; !ok || len(hashes) != 1 || !slices.Equal(*backlog, []bool{true}) {
		t.Errorf("first commit: %d VMs stored (want 1), the changed one (the backlog's last) among them: %v; %d slices let go of the updater; says more of the backlog follows: %v",
			len(hashes), ok, *hooks, *backlog)
	}
	if err := u.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := storedVMs(t, store); n != 101 || *hooks < 3 {
		t.Errorf("then the chunk: %d VMs stored (want 101); %d slices let go of the updater (want 3 or more)", n, *hooks)
	}
	flushAll(t, u)
	changed := *inv
	changed.VMs = slices.Clone(inv.VMs)
	for i := range changed.VMs {
		if changed.VMs[i].UUID == last.UUID {
			changed.VMs[i] = *stopped(last)
		}
	}
	whole, wu := windowUpdater(t, time.Millisecond)
	wu.SetInventory(&changed, "load")
	flushAll(t, wu)
	if got, want := sortedDump(t, store), sortedDump(t, whole); !slices.Equal(got, want) {
		t.Errorf("the zone differs from a first load of the changed inventory: %s", firstDiff(got, want))
	}
}

// sortedDump is dump of hzZone, sorted: a store's keys depend on the
// order its names were first written.
func sortedDump(t *testing.T, store *db.DB) []string {
	return slices.Sorted(slices.Values(dump(t, store, hzZone)))
}

// A configuration change between two slices drops the chunk: what was
// computed with the configuration before is never committed, and every
// VM is computed again with the new one.
func TestConfigChangeBetweenSlices(t *testing.T) {
	rc, zc := hzConfig()
	rc.UseAlias = !rc.UseAlias
	var logs, wholeLogs syncBuffer
	inv, store, u, _ := firstLoadInSlices(t, slog.NewJSONHandler(&logs, nil), func(u *feeds.Updater) { u.SetConfig(rc, zc) })
	flushAll(t, u)
	whole, wu := loggingUpdater(t, time.Millisecond, slog.NewJSONHandler(&wholeLogs, nil))
	wu.SetConfig(rc, zc)
	wu.SetInventory(inv, "load")
	flushAll(t, wu)
	if got, want := committedVMs(&logs), committedVMs(&wholeLogs); got != want {
		t.Errorf("%d VMs and compute nodes committed, want each once: %d", got, want)
	}
	if got, want := sortedDump(t, store), sortedDump(t, whole); !slices.Equal(got, want) {
		t.Errorf("the zone differs from a first load with the new configuration: %s", firstDiff(got, want))
	}
}

// committedVMs adds up the VMs of the "committed" lines logged to logs
// as JSON.
func committedVMs(logs *syncBuffer) int {
	n := 0
	for _, c := range commitSizes(logs) {
		n += c
	}
	return n
}

// commitSizes returns the VMs of each "committed" line logged to logs as
// JSON.
func commitSizes(logs *syncBuffer) []int {
	var sizes []int
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "committed" {
			sizes = append(sizes, int(m["vms"].(float64)))
		}
	}
	return sizes
}

// VMs of a parked chunk that change while it is parked, and others that
// change meanwhile, are all committed, and the chunk goes on: a first load
// under changes ends with the data center's state.
func TestParkedChunkChanges(t *testing.T) {
	var last dc.VM
	inv, store, u, _ := firstLoadInSlices(t, slog.DiscardHandler, func(u *feeds.Updater) {
		u.SetVM(stopped(last), "changefeed")
	})
	last = byOwnerLast(inv)
	if err := u.Flush(); err != nil { // the change; the chunk is parked
		t.Fatal(err)
	}
	inOrder := byOwner(inv)
	changed := map[string]*dc.VM{last.UUID: stopped(last)}
	for _, vm := range []dc.VM{inOrder[0], inOrder[150]} { // in the parked chunk's first slice; not in that chunk
		changed[vm.UUID] = stopped(vm)
		u.SetVM(changed[vm.UUID], "changefeed")
	}
	for flushes := 0; u.Pending() > 0; flushes++ {
		if flushes == 20 {
			t.Fatalf("%d VMs still pending after 20 commits", u.Pending())
		}
		if err := u.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	final := *inv
	final.VMs = slices.Clone(inv.VMs)
	for i, vm := range final.VMs {
		if c := changed[vm.UUID]; c != nil {
			final.VMs[i] = *c
		}
	}
	whole, wu := windowUpdater(t, time.Millisecond)
	wu.SetInventory(&final, "load")
	flushAll(t, wu)
	if got, want := sortedDump(t, store), sortedDump(t, whole); !slices.Equal(got, want) {
		t.Errorf("the zone differs from a first load of the changed inventory: %s", firstDiff(got, want))
	}
}

// A listing is put in slices, letting go of the updater between them, and
// no batch is computed from a listing half put: a commit then would take
// the part of a first load that happens to be in.
func TestListingInSlices(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 300, Seed: 9})
	store, u := windowUpdater(t, time.Millisecond)
	u.SetSizes(0, 30)
	hooks, pending := 0, 0
	u.SetBetweenListingSlices(func() {
		if hooks++; hooks == 5 {
			pending = u.Pending() // takes the updater's lock
			if err := u.Flush(); err != nil {
				t.Error(err)
			}
		}
	})
	u.SetInventory(inv, "load")
	nodes := 0 // compute nodes, marked before the VMs (their CMON names)
	for _, s := range inv.Servers {
		if s.Setup {
			nodes++
		}
	}
	if hooks < 300/30-1 || pending != nodes+5*30 || storedVMs(t, store) != 0 {
		t.Errorf("%d slices let go of the updater (want %d); half-way %d VMs pending (want %d), and %d stored (want none)",
			hooks, 300/30-1, pending, nodes+5*30, storedVMs(t, store))
	}
	flushAll(t, u)
	if n := storedVMs(t, store); n != nodes+len(inv.VMs) {
		t.Errorf("%d VMs and compute nodes stored after the listing, want %d", n, nodes+len(inv.VMs))
	}
}

// A VM of the chunk being computed that changes again does not park the
// chunk (it goes after it): under Run, with the chunk before still being
// written, the backlog's last chunk ends exactly on a slice while one of
// its VMs waits for its turn again, and the load goes on to its end.
func TestChangeInsideTheChunkDoesNotParkIt(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 320, Seed: 9})
	inOrder := byOwner(inv)
	store, u := windowUpdater(t, time.Millisecond)
	u.SetSizes(200, 30)
	u.SetInventory(inv, "load")
	hold := make(chan struct{})
	first := true
	store.OnCommit(func(c *db.Committed) {
		if first { // the first chunk's commit lasts until the second chunk is computed
			first = false
			<-hold
		}
	})
	hooks := 0
	u.SetBetweenSlices(func() {
		switch hooks++; hooks {
		case 7: // the second chunk's first slice (the first chunk took 7 slices, 6 of them open)
			u.SetVM(stopped(inOrder[200]), "changefeed")
		case 10: // its fourth slice, the backlog's last VMs
			close(hold)
		}
	})
	running(t, u)
	settled(t, u)
	if n := storedVMs(t, store); n < len(inv.VMs) {
		t.Errorf("%d VMs stored, want %d or more", n, len(inv.VMs))
	}
}

// A VM of the chunk being written that changes again goes after it, and
// the chunk computed meanwhile goes on as a chunk: it does not end after
// its first VM as if it had taken that change out of turn.
func TestChangeInFlightDoesNotCutTheNextChunk(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 320, Seed: 9})
	inOrder := byOwner(inv)
	var logs syncBuffer
	store, u := loggingUpdater(t, time.Millisecond, slog.NewJSONHandler(&logs, nil))
	u.SetSizes(200, 30)
	u.SetInventory(inv, "load")
	hold := make(chan struct{})
	first := true
	store.OnCommit(func(*db.Committed) {
		if first { // the first chunk's commit lasts until the second chunk is under way
			first = false
			select {
			case <-hold:
			case <-time.After(2 * time.Second): // (only if the second chunk ended at once)
			}
		}
	})
	hooks := 0
	u.SetBetweenSlices(func() {
		switch hooks++; hooks {
		case 6: // the first chunk's last slice is still to come
			u.SetVM(stopped(inOrder[0]), "changefeed")
		case 7: // the second chunk's first slice
			close(hold)
		}
	})
	running(t, u)
	settled(t, u)
	if sizes := commitSizes(&logs); len(sizes) < 2 || sizes[1] < 30 {
		t.Errorf("commits of %v VMs: the second (the chunk computed while the first was written) should hold 30 or more", sizes)
	}
}

// A listing that comes during a backlog's chunks pauses the backlog, which
// goes on once the listing is in: the pause is not its end (the store's
// backlog signal closing has serve build every table of a first load),
// and only the backlog's last commit says it is over.
func TestListingDuringABacklog(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 320, Seed: 9})
	relisted := *inv
	relisted.VMs = slices.Clone(inv.VMs)
	relisted.VMs[0] = *stopped(inv.VMs[0])
	store, u := windowUpdater(t, time.Millisecond)
	u.SetSizes(100, 30) // chunks of 100, 100, 100 and the rest
	u.SetInventory(inv, "load")
	backlog := backlogFlags(store)
	end := store.Backlog().NextEnd()
	endedEarly := 0 // chunks committed after the backlog was said to be over
	hold := make(chan struct{})
	first := true
	store.OnCommit(func(*db.Committed) {
		select {
		case <-end:
			if store.Backlog().IsOpen() {
				endedEarly++
			}
		default:
		}
		if first { // the first chunk's commit lasts until the listing has begun
			first = false
			<-hold
		}
	})
	listingIn, listingOn := make(chan struct{}), make(chan struct{})
	u.SetBetweenListingSlices(func() {
		select {
		case <-listingIn:
		default:
			close(listingIn)
			<-listingOn
		}
	})
	listed := make(chan struct{})
	hooks := 0
	u.SetBetweenSlices(func() {
		if hooks++; hooks == 4 { // the second chunk's first slice (the first took 4 slices)
			go func() { u.SetInventory(&relisted, "relisting"); close(listed) }()
			<-listingIn
			close(hold)
		}
	})
	running(t, u)
	waitUntil(t, "the first chunk committed", func() bool { return !u.LastCommit().Time.IsZero() }) // the second waits for the listing
	close(listingOn)
	<-listed
	settled(t, u)
	flags := slices.Clone(*backlog)
	if len(flags) < 2 || slices.Index(flags, false) != len(flags)-1 || endedEarly > 0 {
		t.Errorf("commits saying whether more of the backlog follows: %v; only the last should say no; %d chunks came after the backlog was said to be over",
			flags, endedEarly)
	}
}

// running runs u until the test ends.
func running(t *testing.T, u *feeds.Updater) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { u.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// settled waits, at most 10 s, until nothing is pending in u.
func settled(t *testing.T, u *feeds.Updater) {
	t.Helper()
	waitUntil(t, "nothing pending", func() bool { return u.Pending() == 0 })
}

// waitUntil polls cond until it holds, failing the test after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after 10 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
