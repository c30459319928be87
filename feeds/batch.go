package feeds

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/admin/metrics"
	"github.com/tritondatacenter/cns/db"
)

// maxVMsPerCommit is a backlog's chunk while the store is small
// (chunkSize grows it with the store, up to three times). A big load's
// chunks write their names at random places of the name buckets (names
// sort by owner, VMs come by UUID), so every chunk rewrites most of those
// buckets' pages: the bytes a load writes grow with the number of chunks
// (100k VMs: 1.1 GB written in chunks of 5000, 0.44 GB in chunks of
// 20000, for a 0.3 GB file). A chunk's transaction holds its VMs' records
// and the touched pages in memory, which is what bounds it.
var maxVMsPerCommit = 20000 // a variable for tests (export_test.go)

// maxVMsPerSlice is how many VMs the updater computes before it lets go
// of its lock (next): a VM takes 30–45 µs to recompute (1M and 100k
// VMs), so 60–90 ms. A reconcile's batch that has found as many as
// stored is committed then (cut); any other batch goes on filling in the
// next slice (open). A variable for tests.
var maxVMsPerSlice = 2048

// CommitInfo describes the last commit the updater made.
type CommitInfo struct {
	Time     time.Time
	VMs      int
	Duration time.Duration
	// Oldest is how long its oldest VM change had waited when it was
	// served (the longest of its cns_change_latency_seconds).
	Oldest time.Duration
	Err    string
}

func (u *Updater) wake() {
	select {
	case u.kick <- struct{}{}:
	default:
	}
}

// Run commits batches until ctx ends. A failed commit is retried with
// backoff; what was stored before keeps being served. With
// Options.LoadLater it first reads the stored state, retrying likewise.
func (u *Updater) Run(ctx context.Context) error {
	if err := u.loadRetrying(ctx); err != nil {
		return err
	}
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	backoff := time.Duration(0)
	// When the last drain began. At start it is now: what the feeds list
	// first gathers for one window, so the first commit is not of a
	// half-read data center.
	lastDrain := time.Now()
	for {
		var due <-chan time.Time // a held service member's turn
		if d, ok := u.untilNextRelease(); ok {
			due = time.After(d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			u.tick()
			continue
		case <-due:
			u.Tick()
			continue
		case <-u.kick:
		}
		// A change after a quiet spell is committed at once; while changes
		// keep coming, drains begin at least a batch window apart, so a
		// burst gathers into a few commits (serials) however fast it comes.
		if wait := max(u.window-time.Since(lastDrain), 0) + backoff; wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		lastDrain = time.Now()
		if err := u.drain(ctx, tick.C); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// A full or read-only disk: what is served stays (it is in
			// memory), the db is reported degraded, and the batch waits.
			backoff = min(max(2*backoff, time.Second), 30*time.Second)
			u.log.Error("commit failed; keeping the stored zones and retrying", "err", err, "retry_in", backoff.String())
			u.ReportFeed(StoreFeed, err)
			u.wake()
			continue
		}
		if backoff > 0 {
			u.ReportFeed(StoreFeed, nil)
		}
		backoff = 0
	}
}

// loadRetrying reads the stored state unless that is done, retrying with
// backoff until it succeeds or ctx ends.
func (u *Updater) loadRetrying(ctx context.Context) error {
	backoff := time.Second
	for {
		select {
		case <-u.loaded:
			return nil
		default:
		}
		err := u.load(true)
		if err == nil {
			return nil
		}
		u.log.Error("cannot read the stored VMs; the feeds wait", "err", err, "retry_in", backoff.String())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// tick is Run's periodic work: the time-dependent rules and saving when
// VMs were last seen.
func (u *Updater) tick() {
	u.Tick()
	if err := u.SaveLastSeen(); err != nil {
		u.log.Warn("saving when VMs were last seen failed; kept in memory", "err", err)
	}
}

// drain commits a backlog, chunk after chunk, without waiting for the
// batch window between them (the backlog of a big load is all there
// already). While one chunk is being committed the next one is computed,
// so the record computation and the commit use two cores. A batch
// computed ahead stays correct whatever happens meanwhile: a VM marked
// again after it was computed keeps its newer generation and stays dirty
// (see settle), and commits land in the order they were computed.
// A batch that is not a full chunk ends the drain: what changed while it
// was committed waits for the next window (Run), rather than following at
// once in a string of commits of a few VMs each, every one a serial of
// the zones it touches.
//
// A shutdown (ctx ending) does not wait for the batch: its computation
// stops where it is and its commit gives up before anything is written
// (db.ChangeSet.Stop). Its VMs were never settled, so the next start
// computes them again from the feeds.
func (u *Updater) drain(ctx context.Context, tick <-chan time.Time) error {
	b, release := u.next(ctx, nil)
	if release {
		u.releaseMemory()
	}
	batches := 0
	var last *batch
	for ; b != nil; batches++ {
		if err := ctx.Err(); err != nil {
			u.dropped(b) // b may have been cut short: never commit it
			return err
		}
		b.cs.Stop = ctx.Done()
		done := make(chan error, 1)
		go func() { done <- u.commitBatch(b) }()
		var next *batch
		release := false
		if b.fullChunk() || b.cut {
			// The next chunk (or slice), without the VMs and sources in
			// flight.
			next, release = u.next(ctx, b)
		}
		if err := <-done; err != nil {
			if errors.Is(err, db.ErrStopped) {
				u.dropped(b)
			}
			return err // next is dropped: its VMs are still dirty
		}
		if release { // a reconcile that ended in slices with nothing to commit
			u.releaseMemory()
		}
		last, b = b, next
		select { // what Run would do between two batches
		case <-ctx.Done():
			if b != nil {
				u.dropped(b)
			}
			return ctx.Err()
		case <-tick:
			u.tick()
		default:
		}
	}
	if last != nil && last.cs.Backlog {
		// The backlog ended on a full chunk, which promised another
		// commit: an empty one tells the hooks that it is over.
		if _, err := u.store.Commit(&db.ChangeSet{Cause: "end of backlog"}); err != nil {
			return err
		}
	}
	if batches > 1 {
		// A backlog in chunks (a first load) is in: give back the pages
		// its chunks left free.
		u.compactIfSparse()
	}
	return nil
}

// dropped logs a batch left uncommitted by a shutdown.
func (u *Updater) dropped(b *batch) {
	u.log.Info("shutting down: batch not committed; the next start computes it again", "vms", len(b.cs.VMs))
}

// compactIfSparse compacts the store live when a large backlog left much
// of the file free (db.DB.CompactIfSparse): a first load's chunks
// rewrite most pages of the name buckets, and the pages the last ones
// freed would stay free in a steady data center. Commits wait meanwhile
// (100k VMs: ~1 s); a failure leaves the file as it was.
func (u *Updater) compactIfSparse() {
	start := time.Now()
	res, ok, err := u.store.CompactIfSparse()
	switch {
	case err != nil:
		u.log.Warn("compacting the db after a large load failed; it keeps its free pages", "err", err)
	case ok:
		u.log.Info("db compacted", "before", res.Before, "after", res.After, "took", time.Since(start).String())
		// The copy's garbage and the old file's pages it read: a first
		// load of 1M VMs stayed at ~4 GB resident without this.
		u.releaseMemory()
	}
}

// Flush computes and commits the next batch now (a backlog's next chunk,
// a reconcile's next slice that found changes), as one change set.
// VMs whose records and decision did not change (their hash matches the
// stored one) are settled without touching the store, so a restart's
// reconcile of an unchanged data center writes nothing.
func (u *Updater) Flush() error {
	u.lock() // (waits for the stored state to be read)
	u.mu.Unlock()
	b, release := u.next(context.Background(), nil)
	if release {
		u.releaseMemory()
	}
	if b == nil {
		return nil
	}
	return u.commitBatch(b)
}

// next computes the next batch to commit, nil when there is nothing to
// commit; it takes u.mu for each slice of the work (maxVMsPerSlice).
// release tells the caller to hand memory back. With inFlight (a batch
// computed but not settled yet) it leaves out inFlight's VMs and, when
// inFlight took any, the queued sources.
//
// The feeds are not held up while a big batch is computed: a first
// load's chunk (1M VMs: up to 60k VMs, 1.3–2.7 s of computing) fills in
// slices. A change they bring meanwhile is committed first, in a batch of
// its own, and the chunk is parked until that batch is computed; but not
// twice in a row (a change during the rest of the chunk joins it), so
// the backlog goes on under steady changes. A restart's reconcile
// recomputes every VM to find most of them as stored (1M VMs: ~20 s): a
// slice that found changes is committed, so they are served while the
// reconcile goes on, and one that found nothing is followed by the next
// at once.
func (u *Updater) next(ctx context.Context, inFlight *batch) (b *batch, release bool) {
	u.mu.Lock()
	open := u.parked // parked for the batch before: it goes on now, a slice at least
	u.parked = nil
	u.mu.Unlock()
	resumed := open != nil
	before := 0 // found as stored by the slices before b, which had nothing to commit
	for {
		u.mu.Lock()
		if open != nil && open.zonesAt != u.zonesGen {
			// The configuration changed: what open computed is out of
			// date. Its VMs are still dirty (every one marked again).
			open = nil
		}
		if open != nil && !resumed && u.parked == nil && len(u.urgent) > 0 && !u.urgentCut {
			u.parked, open = open, nil
		}
		resumed = false
		if u.listing {
			// A listing is being put (SetInventory), which wakes the
			// updater when it is in; a chunk in the making waits for it.
			if open != nil && u.parked == nil {
				u.parked = open
			}
			u.mu.Unlock()
			return nil, false
		}
		b, release = u.prepare(ctx, inFlight, open, before)
		if u.parked != nil && (b == nil || !b.open && b.empty()) {
			// The urgent VMs came to nothing to commit: the chunk goes on.
			open, u.parked = u.parked, nil
			if b != nil {
				open.before += b.before + b.unchanged
			}
			u.mu.Unlock()
			continue
		}
		u.mu.Unlock()
		switch {
		case b == nil:
			return nil, release
		case b.open:
			open = b
		case b.empty() && b.cut:
			open, before = nil, b.before+b.unchanged
		default:
			return b, release
		}
		if betweenSlices != nil {
			betweenSlices()
		}
	}
}

// betweenSlices, when set (tests), runs in next between two slices,
// u.mu not held.
var betweenSlices func()

// prepare computes the next slice of work (next): of the batch open, or
// of a new one; u.mu is held. It returns an open batch when more of it
// follows, an empty one when a reconcile's slice found nothing to commit
// (cut), and nil when there is nothing to commit; before counts the VMs
// found as stored by the slices before.
func (u *Updater) prepare(ctx context.Context, inFlight, open *batch, before int) (b *batch, release bool) {
	if open == nil && len(u.dirty) == 0 && u.zonesGen == u.zonesSaved && len(u.health.dirty) == 0 && !u.sourcesPending() {
		return nil, false
	}
	b = u.collect(ctx, open, inFlight)
	if open == nil {
		b.before = before
	}
	if b.open || !b.empty() {
		return b, false
	}
	if b.cut && ctx.Err() == nil {
		return b, false // the reconcile goes on
	}
	unchanged := b.before + b.unchanged
	if inFlight != nil && unchanged == 0 {
		return nil, false // settling inFlight ends the burst (and logs)
	}
	// Nothing to commit: say so when VMs were found as stored (the end of
	// a reconcile, which may have outlasted inFlight's commit).
	u.log.Info("committed", "vms", 0, "unchanged", unchanged, "zones", 0, "pending", u.pending(), "took", "0s")
	if len(u.dirty) == 0 { // (inFlight's VMs stay dirty until it settles, with their causes)
		clear(u.causes)
	}
	return nil, u.endOfBurst()
}

// commitBatch stores b and settles it; u.mu is not held.
func (u *Updater) commitBatch(b *batch) error {
	cs := b.cs
	start := time.Now()
	res, err := u.store.Commit(cs)
	served := mono() // the hooks ran: the answers show cs

	u.mu.Lock()
	defer u.mu.Unlock()
	u.lastCommit = CommitInfo{Time: u.now(), VMs: len(cs.VMs) - b.computeNodes, Duration: time.Since(start)}
	if err != nil {
		u.lastCommit.Err = err.Error()
		return err
	}
	if u.settle(b, served) {
		defer u.releaseMemory()
	}
	if len(u.dirty) > 0 || u.sourcesPending() {
		u.wake() // the rest of a chunked batch
	} else {
		clear(u.causes)
	}
	for _, p := range res.Problems {
		u.log.Warn(p)
	}
	u.log.Info("committed", "vms", len(cs.VMs), "unchanged", b.before+b.unchanged, "zones", len(res.Zones), "pending", u.pending(), "took", u.lastCommit.Duration.String())
	for _, z := range res.Zones {
		if z.Removed {
			u.log.Info("zone removed", "zone", z.Zone)
		} else {
			// Debug: a commit touches the forward zone and a reverse zone
			// per /24 of its VMs, so at 1,000 VM changes a second these
			// lines were ~520 a second (bench/busydc.sh), ~9 GB of log a
			// day. `cnsadm status` and `cnsadm history ZONE` keep the
			// serials; "committed" says how many zones changed.
			u.log.Debug("zone updated", "zone", z.Zone, "serial", z.Serial, "names", len(z.Names), "cause", cs.Cause)
		}
	}
	return nil
}

// batch is one change set on its way to the store, with the generation
// of each VM and hysteresis entry in it: one marked again meanwhile stays
// pending after the commit.
type batch struct {
	cs         *db.ChangeSet
	gens       map[string]dirtyVM // each VM's mark when the batch took it
	healthGens map[string]uint64
	zonesGen   uint64 // the generation of the zone config in cs.Zones
	// zonesAt is the zone config's generation when the batch began: a
	// batch computed in slices is dropped when it changes (next).
	zonesAt   uint64
	unchanged int // VMs recomputed to what the store holds already
	// before: VMs found as stored by the slices before the batch that
	// had nothing to commit (logged with it).
	before int
	// computeNodes counts the entries of cs.VMs that are compute nodes'
	// CMON names, not VMs.
	computeNodes int
	// at is when the batch was computed: its VMs' stored meta says they
	// were seen then (Updated is no older).
	at       int64
	computed int64 // mono() when the batch was computed
	sources  sourceTake
	size     int // the VMs a full chunk holds
	// cut: collect stopped after maxVMsPerSlice VMs found as stored,
	// with dirty VMs left; the next slice follows at once.
	cut bool
	// open: the batch is not full and more dirty VMs are left; its next
	// slice follows once u.mu has been let go.
	open bool
}

// fullChunk reports whether b holds as many VMs as a commit takes: a
// backlog is being drained, and more of it is probably pending.
func (b *batch) fullChunk() bool { return len(b.cs.VMs) >= b.size }

// empty reports whether b has nothing to commit.
func (b *batch) empty() bool {
	cs := b.cs
	return len(cs.VMs) == 0 && cs.Zones == nil && len(cs.Hysteresis) == 0 && len(cs.Sources) == 0
}

// chunkSize is how many VMs the next chunk takes: maxVMsPerCommit, or a
// quarter of the VMs stored, up to three times that. Every chunk rewrites
// pages all over the buckets it does not append to (reverse zones, the
// VMs by UUID), so once the store is large a bigger chunk rewrites fewer
// pages per VM. A first load of 1M VMs (bench/load.sh, medians of 2, in
// UUID order): 20k chunks, 51 commits, 10.9 GB written, 11.2k VMs/s, peak
// RSS 5.7 GB; these, 23 commits, 6.5 GB, 13.3k VMs/s, 7.5 GB. Uncapped
// they made 14.3k VMs/s for 9.1 GB peak. In owner order a cap of five
// times gained 2 % for 1.4 GB more peak. u.mu is held.
func (u *Updater) chunkSize() int {
	return min(max(maxVMsPerCommit, len(u.hashes)/4), 3*maxVMsPerCommit)
}

// collect computes the next change set, or the next slice of open (nil:
// a new batch); u.mu is held. A very large batch (a first start, a
// config change) is committed in chunks of changed VMs: each chunk is
// consistent, and the write transaction's memory stays bounded. inFlight,
// when not nil, is a batch on its way to the store: its VMs and the
// sources it took are not taken again.
func (u *Updater) collect(ctx context.Context, open, inFlight *batch) *batch {
	b := open
	if b == nil {
		b = &batch{cs: &db.ChangeSet{Cause: u.causeSummary()}, gens: map[string]dirtyVM{}, at: u.now().UnixMilli(), computed: mono(), size: u.chunkSize(), zonesAt: u.zonesGen}
		if u.zonesGen != u.zonesSaved && (inFlight == nil || inFlight.zonesGen != u.zonesGen) {
			z := u.zones
			b.cs.Zones, b.zonesGen = &z, u.zonesGen
		}
	}
	b.open = false
	for uuid := range u.dirtyInOrder(ctx, b, inFlight) {
		mark := u.dirty[uuid]
		vc, ok := u.change(uuid)
		switch {
		case !ok:
			delete(u.dirty, uuid) // cannot be computed now; its records stay
		case !vc.Delete && vc.Hash == u.hashes[uuid]:
			delete(u.dirty, uuid)
			b.unchanged++
		default:
			b.gens[uuid] = mark
			b.cs.VMs = append(b.cs.VMs, vc)
			if !vc.Delete && u.vms[uuid] == nil {
				b.computeNodes++
			}
		}
	}
	if b.open {
		return b
	}
	// Backlog: changed VMs alone fill the chunk, so the next one follows
	// at once; or changes taken out of turn between a backlog's chunks,
	// or before the rest of one (parked), which follows. (serve leaves a
	// backlog's zones to the store until it ends: a batch that did not
	// say so had it build every table of a first load again, 100k VMs:
	// ~0.4 s of CPU.) An aggregated source's chunks do not count: drain
	// takes a source's next part only after this one landed.
	b.cs.Backlog = len(b.cs.VMs) >= b.size || u.urgentCut && b.cut && (u.chunking || u.parked != nil)
	u.chunking = b.cs.Backlog
	if inFlight == nil || inFlight.sources == (sourceTake{}) {
		b.sources = u.takeSources(b.cs)
	}
	var flying map[string]uint64 // hysteresis entries in flight, unchanged since: not again
	if inFlight != nil {
		flying = inFlight.healthGens
	}
	// A full chunk: more of the backlog follows, and the services only
	// it changed can wait for the last chunk (serviceHealth.writes).
	more := b.fullChunk() || b.cut
	b.cs.Hysteresis, b.healthGens = u.health.writes(flying, more)
	u.burst += len(b.cs.VMs) + b.unchanged
	return b
}

// dirtyInOrder yields the dirty VMs collect takes next, by owner then
// UUID (dirtyOrder), until b is full, or until this slice has yielded
// maxVMsPerSlice VMs (b.open), or, in a reconcile, until b has found
// that many as stored (b.cut); not those already in b or in inFlight; no
// more once ctx has ended. The order comes from a sorted snapshot of the
// dirty set that the chunks of a backlog share (sorting a million VMs
// for every chunk of 20,000 would cost more than the chunk); VMs marked
// after it was taken come first if they are few (urgent: a change during
// a long backlog), in a second snapshot otherwise, taken when the first
// runs out. u.mu is held.
func (u *Updater) dirtyInOrder(ctx context.Context, b, inFlight *batch) iter.Seq[string] {
	return func(yield func(string) bool) {
		var busy []string // VMs in flight marked again since: urgent after this batch
		defer func() { u.urgent = append(u.urgent, busy...) }()
		fresh, urgent, cutForUrgent := false, false, false
		defer func() { u.urgentCut = cutForUrgent }()
		// A batch's later slices take urgent VMs as the rest: the change
		// joins the chunk being computed, which is committed as soon as a
		// batch of its own would be (after the one in flight).
		continued := len(b.cs.VMs) > 0
		yielded := 0
		for n := 0; len(b.cs.VMs) < b.size; n++ {
			if n%256 == 0 && ctx.Err() != nil {
				return // stopping: drain drops the batch
			}
			// A change taken out of turn is committed at once, not after
			// the rest of a slice or chunk; but not twice in a row, so
			// that the backlog goes on under steady changes.
			more := len(u.dirty) > len(b.gens)
			switch {
			case b.unchanged >= maxVMsPerSlice:
				b.cut = more
				return
			case yielded >= maxVMsPerSlice:
				b.open = more
				return
			case urgent && len(u.urgent) == 0 && len(b.cs.VMs) > 0 && !continued && !u.urgentCut:
				b.cut, cutForUrgent = more, true
				return
			}
			var uuid string
			switch {
			case len(u.urgent) > 0:
				uuid, u.urgent, urgent = u.urgent[0], u.urgent[1:], true
			case len(u.order) > 0:
				uuid, u.order = u.order[0], u.order[1:]
			case fresh:
				return
			default:
				u.order, fresh = u.dirtyOrder(), true
				continue
			}
			mark, dirty := u.dirty[uuid]
			if !dirty {
				continue // settled since the snapshot
			}
			if taken, inBatch := b.gens[uuid]; inBatch {
				if continued && taken.gen != mark.gen {
					busy = append(busy, uuid) // marked again since an earlier slice took it
				}
				continue
			}
			if elsewhere, marked := u.takenElsewhere(uuid, mark, b, inFlight); elsewhere {
				if marked {
					busy = append(busy, uuid) // marked again since: its turn after that batch
				}
				continue
			}
			yielded++
			if !yield(uuid) {
				return
			}
		}
	}
}

// takenElsewhere reports whether uuid is in the batch in flight or in the
// parked one (another than b), and whether it was marked again since.
// u.mu is held.
func (u *Updater) takenElsewhere(uuid string, mark dirtyVM, b, inFlight *batch) (taken, marked bool) {
	for _, o := range [...]*batch{inFlight, u.parked} {
		if o == nil || o == b {
			continue
		}
		if t, ok := o.gens[uuid]; ok {
			return true, t.gen != mark.gen
		}
	}
	return false, false
}

// dirtyOrder returns the dirty set sorted by owner, then UUID; a VM not
// held (deleted) sorts first. A zone's names sort by owner first
// (<uuid>.inst.<owner>, <alias>.inst.<owner>, <svc>.svc.<owner>), so
// the chunks of a backlog in this order write the forward zone's name
// bucket in runs: a first load appends to it, and a service's name is
// written once, with all its members, not again in every chunk that
// holds one of them. u.mu is held.
func (u *Updater) dirtyOrder() []string {
	type ownedVM struct{ owner, uuid string }
	vms := make([]ownedVM, 0, len(u.dirty))
	for uuid := range u.dirty {
		var owner string
		if v := u.vms[uuid]; v != nil {
			owner = v.owner
		}
		vms = append(vms, ownedVM{owner, uuid})
	}
	slices.SortFunc(vms, func(a, b ownedVM) int {
		if c := strings.Compare(a.owner, b.owner); c != 0 {
			return c
		}
		return strings.Compare(a.uuid, b.uuid)
	})
	order := make([]string, len(vms))
	for i, v := range vms {
		order[i] = v.uuid
	}
	return order
}

// settle records a committed batch, served since served (mono); u.mu is
// held. It reports whether the burst the batch ended was big enough to
// hand memory back.
func (u *Updater) settle(b *batch, served int64) bool {
	u.commits++
	u.hist.Observe(u.lastCommit.Duration.Seconds())
	u.health.written(b.healthGens)
	u.sourcesCommitted(b.sources)
	if b.cs.Zones != nil {
		u.zonesSaved = max(u.zonesSaved, b.zonesGen)
	}
	for _, vc := range b.cs.VMs {
		if taken, ok := b.gens[vc.UUID]; ok { // (an aggregated source's pseudo-VMs were never dirty)
			u.lastCommit.Oldest = max(u.lastCommit.Oldest, u.committed(vc.UUID, taken, b.computed, served))
		}
		if vc.Delete {
			delete(u.hashes, vc.UUID)
		} else {
			u.hashes[vc.UUID] = vc.Hash
			if v := u.vms[vc.UUID]; v != nil {
				v.seen.saved = max(v.seen.saved, b.at)
			} else if f := u.servers[vc.UUID]; f != nil {
				f.seen.saved = max(f.seen.saved, b.at)
			}
		}
	}
	return u.endOfBurst()
}

// committed settles a dirty VM whose change, as b took it (taken), is
// served since served, and returns how long that change waited: the wait
// goes into the latency histogram, and the VM leaves the dirty set unless
// it was marked again meanwhile. u.mu is held.
func (u *Updater) committed(uuid string, taken dirtyVM, computed, served int64) time.Duration {
	wait := time.Duration(served - taken.since)
	u.latency.Observe(wait.Seconds())
	d, ok := u.dirty[uuid]
	switch {
	case !ok:
	case d.gen == taken.gen:
		delete(u.dirty, uuid)
	default:
		// Marked again while we committed: it stays dirty, its wait
		// counted from when the batch was computed (at most that early).
		d.since = computed
		u.dirty[uuid] = d
	}
	return wait
}

// causeSummary describes the pending batch in one line.
func (u *Updater) causeSummary() string {
	s := strings.Join(slices.Sorted(maps.Keys(u.causes)), "; ")
	if n := len(u.dirty); n > 0 {
		s = fmt.Sprintf("%s (%d VMs)", s, n)
	}
	return s
}

// Pending returns how many VMs (and aggregated pseudo-VMs) wait for the
// next commit.
func (u *Updater) Pending() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.pending()
}

// LastCommit describes the last commit attempt.
func (u *Updater) LastCommit() CommitInfo {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lastCommit
}

// commitBounds are the commit histogram's upper bounds, seconds.
var commitBounds = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// CommitHistogram returns the commit durations so far.
func (u *Updater) CommitHistogram() metrics.Histogram {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hist.Clone()
}

// LatencyHistogram returns, for every VM change committed so far, the
// time from the updater learning of it (a feed's delivery, a listing, an
// owner, network or compute node change marking it) to the end of the
// commit that serves it: the batch window, the queue before it and the
// commit. Changes that left a VM's records as they were do not count.
func (u *Updater) LatencyHistogram() metrics.Histogram {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.latency.Clone()
}

// monoStart is the origin of mono.
var monoStart = time.Now()

// mono is the monotonic clock in nanoseconds, for durations kept in
// pointer-free values (time.Time holds a *Location).
func mono() int64 { return int64(time.Since(monoStart)) }

// bigBurst is the number of VMs computed in one go (a start, a full
// listing, a config change) after which memory is handed back.
const bigBurst = 10000

// endOfBurst reports, once the dirty set is empty, whether the burst that
// emptied it was big. Callers hold mu.
func (u *Updater) endOfBurst() bool {
	if len(u.dirty) > 0 || u.sourcesPending() {
		return false
	}
	big := u.burst >= bigBurst
	u.burst = 0
	if big {
		// A map keeps its largest size, and the emptied order its array:
		// after a million VMs, 84 and 16 MB of heap (measured apart).
		u.dirty, u.order, u.urgent = map[string]dirtyVM{}, nil, nil
	}
	return big
}

// releaseMemory gives the transient memory of a big load back to the
// system now, not over minutes: the Go heap's free pages, and the pages
// of the db file the load read.
func (u *Updater) releaseMemory() {
	debug.FreeOSMemory()
	if err := u.store.ReleaseMemory(); err != nil {
		u.log.Debug("release db pages", "err", err)
	}
}
