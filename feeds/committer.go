package feeds

import (
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/tritondatacenter/cns/admin/metrics"
	"github.com/tritondatacenter/cns/db"
)

// The committer runs the batches the scheduler planned against the store
// (db.Commit), keeps the commit metrics, says when a backlog is being
// committed (db.Backlog), and compacts the store after a backlog in
// chunks. The updater settles a batch it stored (settle): the dirty set,
// the stored digests, the hysteresis state and the sources.
//
// store is the one place a computed batch passes on its way to the
// store, right after the guard on mass removals held back part of it
// (guardRemovals, removals.go).
type committer struct {
	db  *db.DB
	log *slog.Logger
	// window is the shortest time between the starts of two drains
	// (Options.BatchWindow). Run's.
	window time.Duration
	// Under the updater's mu:
	commits uint64
	last    CommitInfo
	hist    metrics.Histogram // commit durations
	latency metrics.Histogram // a VM's change → the commit that serves it
	// compactDue: a drain committed several batches (a first load's
	// chunks) and the store was not compacted after them yet. Run's
	// goroutine only.
	compactDue bool
}

func newCommitter(store *db.DB, log *slog.Logger, window time.Duration) committer {
	return committer{db: store, log: log, window: window, hist: metrics.NewHistogram(commitBounds), latency: metrics.NewHistogram(metrics.LatencyBounds)}
}

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

// store commits b. The store's backlog signal says what b is while its
// hooks run: open for a backlog's chunk (more follows at once), closed
// for any other batch, which ends a backlog once it is in (db.Backlog's
// Ending). served is mono() when the hooks had run (the answers show b).
func (c *committer) store(b *batch) (res *db.Committed, served int64, took time.Duration, err error) {
	if b.backlog {
		c.db.Backlog().Open()
	} else {
		c.db.Backlog().Ending()
		defer c.db.Backlog().Close()
	}
	start := time.Now()
	res, err = c.db.Commit(b.cs)
	served, took = mono(), time.Since(start)
	if err == nil && b.backlog {
		// A backlog's chunks (a first load) read pages all over the file
		// (the reverse zones, the VMs by UUID), and the mapped pages stay
		// resident until released: by the last chunk of a 100k-VM load,
		// ~130 MiB of its peak. Released after each chunk, they are what
		// one commit touched.
		c.releaseFilePages()
	}
	return res, served, took, err
}

// landed counts a commit that landed (c.last); the updater's mu is held.
func (c *committer) landed() {
	c.commits++
	c.hist.Observe(c.last.Duration.Seconds())
}

// drained ends a drain that committed batches; over is false when a
// listing paused it (the backlog goes on after the listing). A backlog
// that ended on a full chunk promised another commit: closing the signal
// tells the hooks that it is over. A backlog in chunks (a first load)
// that is in has the store compacted.
func (c *committer) drained(batches int, over bool) {
	c.compactDue = c.compactDue || batches > 1
	if !over {
		return
	}
	c.db.Backlog().Close()
	if c.compactDue {
		c.compactDue = false
		c.compactIfSparse()
	}
}

// compactIfSparse compacts the store live when a large backlog left much
// of the file free (db.DB.CompactIfSparse): a first load's chunks
// rewrite most pages of the name buckets, and the pages the last ones
// freed would stay free in a steady data center. Commits wait meanwhile
// (100k VMs: ~1 s); a failure leaves the file as it was.
func (c *committer) compactIfSparse() {
	start := time.Now()
	res, ok, err := c.db.CompactIfSparse()
	switch {
	case err != nil:
		c.log.Warn("compacting the db after a large load failed; it keeps its free pages", "err", err)
	case ok:
		c.log.Info("db compacted", "before", res.Before, "after", res.After, "took", time.Since(start).String())
		// The copy's garbage and the old file's pages it read: a first
		// load of 1M VMs stayed at ~4 GB resident without this.
		c.releaseMemory()
	}
}

// releaseMemory gives the transient memory of a big load back to the
// system now, not over minutes: the Go heap's free pages, and the pages
// of the db file the load read.
func (c *committer) releaseMemory() {
	debug.FreeOSMemory()
	c.releaseFilePages()
}

// releaseFilePages lets go of the pages of the db file mapped so far
// (db.DB.ReleaseMemory); they stay in the page cache.
func (c *committer) releaseFilePages() {
	if err := c.db.ReleaseMemory(); err != nil {
		c.log.Debug("release db pages", "err", err)
	}
}

// LastCommit describes the last commit attempt.
func (u *Updater) LastCommit() CommitInfo {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.commit.last
}

// commitBounds are the commit histogram's upper bounds, seconds.
var commitBounds = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// CommitHistogram returns the commit durations so far.
func (u *Updater) CommitHistogram() metrics.Histogram {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.commit.hist.Clone()
}

// LatencyHistogram returns, for every VM change committed so far, the
// time from the updater learning of it (a feed's delivery, a listing, an
// owner, network or compute node change marking it) to the end of the
// commit that serves it: the batch window, the queue before it and the
// commit. Changes that left a VM's records as they were do not count.
func (u *Updater) LatencyHistogram() metrics.Histogram {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.commit.latency.Clone()
}

// monoStart is the origin of mono.
var monoStart = time.Now()

// mono is the monotonic clock in nanoseconds, for durations kept in
// pointer-free values (time.Time holds a *Location).
func mono() int64 { return int64(time.Since(monoStart)) }
