package feeds

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/db"
)

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
		if wait := max(u.commit.window-time.Since(lastDrain), 0) + backoff; wait > 0 {
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
	b, release, paused := u.next(ctx, nil)
	if release {
		u.commit.releaseMemory()
	}
	batches := 0
	for ; b != nil; batches++ {
		if err := ctx.Err(); err != nil {
			u.dropped(b) // b may have been cut short: never commit it
			return err
		}
		b.cs.Stop = ctx.Done()
		more := b.fullChunk() || b.cut // (before the guard takes VMs out of b)
		u.guardRemovals(b)             // (before the next batch is computed)
		done := make(chan error, 1)
		go func() { done <- u.commitBatch(b) }()
		var next *batch
		release := false
		if more {
			// The next chunk (or slice), without the VMs and sources in
			// flight.
			next, release, paused = u.next(ctx, b)
		}
		if err := <-done; err != nil {
			if errors.Is(err, db.ErrStopped) {
				u.dropped(b)
			}
			return err // next is dropped: its VMs are still dirty
		}
		if release { // a reconcile that ended in slices with nothing to commit
			u.commit.releaseMemory()
		}
		b = next
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
	// A listing that came during a backlog stopped the drain (next) until
	// it is in; the backlog goes on after it, and is not over.
	u.commit.drained(batches, !paused)
	return nil
}

// dropped logs a batch left uncommitted by a shutdown.
func (u *Updater) dropped(b *batch) {
	u.log.Info("shutting down: batch not committed; the next start computes it again", "vms", len(b.cs.VMs))
}

// Flush computes and commits the next batch now (a backlog's next chunk,
// a reconcile's next slice that found changes), as one change set.
// VMs whose records and decision did not change (their hash matches the
// stored one) are settled without touching the store, so a restart's
// reconcile of an unchanged data center writes nothing.
func (u *Updater) Flush() error {
	u.lock() // (waits for the stored state to be read)
	u.mu.Unlock()
	b, release, _ := u.next(context.Background(), nil)
	if release {
		u.commit.releaseMemory()
	}
	if b == nil {
		return nil
	}
	u.guardRemovals(b)
	return u.commitBatch(b)
}

// commitBatch stores b (committer) and settles it, once the guard on mass
// removals had its turn (guardRemovals); u.mu is not held.
func (u *Updater) commitBatch(b *batch) error {
	cs := b.cs
	res, served, took, err := u.commit.store(b)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.commit.last = CommitInfo{Time: u.now(), VMs: len(cs.VMs) - b.computeNodes, Duration: took}
	if err != nil {
		u.commit.last.Err = err.Error()
		return err
	}
	if u.settle(b, served) {
		defer u.commit.releaseMemory()
	}
	if u.sched.pending() > 0 || u.sourcesPending() {
		u.wake() // the rest of a chunked batch
	} else {
		clear(u.causes)
	}
	for _, p := range res.Problems {
		u.log.Warn(p)
	}
	u.log.Info("committed", "vms", len(cs.VMs), "held", len(b.held), "unchanged", b.before+b.unchanged, "zones", len(res.Zones), "pending", u.pending(), "took", took.String())
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
	picks
	cs         *db.ChangeSet
	healthGens map[string]uint64
	zonesGen   uint64 // the generation of the zone config in cs.Zones
	// zonesAt is the zone config's generation when the batch began: a
	// batch computed in slices is dropped when it changes (next).
	zonesAt uint64
	// computeNodes counts the entries of cs.VMs that are compute nodes'
	// CMON names, not VMs.
	computeNodes int
	// at is when the batch was computed: its VMs' stored meta says they
	// were seen then (Updated is no older).
	at       int64
	computed int64 // mono() when the batch was computed
	sources  sourceTake
	// For the guard on mass removals (removals.go): the VMs stored when
	// the batch began, the candidates and the held VMs computed to
	// something else, and what the guard held out of the batch.
	stored     int
	candidates []candidate
	kept       []string
	held       []string
	guardGen   uint64 // the guard state's generation in cs.Guard
}

// fullChunk reports whether b holds as many VMs as a commit takes: a
// backlog is being drained, and more of it is probably pending.
func (b *batch) fullChunk() bool { return len(b.cs.VMs) >= b.size }

// empty reports whether b has nothing to commit.
func (b *batch) empty() bool {
	cs := b.cs
	return len(cs.VMs) == 0 && cs.Zones == nil && len(cs.Hysteresis) == 0 && len(cs.Sources) == 0 && cs.Guard == nil &&
		len(b.kept) == 0
}

// settle records a committed batch, served since served (mono); u.mu is
// held. It reports whether the burst the batch ended was big enough to
// hand memory back.
func (u *Updater) settle(b *batch, served int64) bool {
	u.commit.landed()
	u.health.written(b.healthGens)
	u.guardSettled(b)
	u.sourcesCommitted(b.sources)
	if b.cs.Zones != nil {
		u.zonesSaved = max(u.zonesSaved, b.zonesGen)
	}
	for _, vc := range b.cs.VMs {
		if taken, ok := b.gens[vc.UUID]; ok { // (an aggregated source's pseudo-VMs were never dirty)
			u.commit.last.Oldest = max(u.commit.last.Oldest, u.committed(vc.UUID, taken, b.computed, served))
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
	u.commit.latency.Observe(wait.Seconds())
	u.sched.committed(uuid, taken, computed)
	return wait
}

// causeSummary describes the pending batch in one line.
func (u *Updater) causeSummary() string {
	s := strings.Join(slices.Sorted(maps.Keys(u.causes)), "; ")
	if n := u.sched.pending(); n > 0 {
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

// endOfBurst reports, once nothing is pending, whether the burst that
// emptied the dirty set was big. Callers hold mu.
func (u *Updater) endOfBurst() bool { return u.sched.endOfBurst(u.sourcesPending()) }
