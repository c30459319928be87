// Package feeds turns what the data center says (from the SDC APIs or an
// inventory file) into change sets for the store. The Updater is the only
// writer: sources tell it what they saw, it works out which VMs need their
// records recomputed, and commits them in batches.
//
// The Updater's parts: its model of the data center and the indexes over
// it, fed through dc.Sink (model.go); batching and committing, with the
// commit histogram and the memory release after a big load (batch.go);
// computing one VM's change (changes.go); the self-removal hysteresis of
// service members (selfremoval.go); the guard on mass removals
// (removals.go); and what it stores per VM and the feeds' health
// (meta.go).
package feeds

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/guard"
	"github.com/tritondatacenter/cns/feeds/hysteresis"
	"github.com/tritondatacenter/cns/feeds/records"
)

// StoreFeed is the name under which the db's health is reported with the
// feeds: degraded while commits fail (disk full, read-only).
const StoreFeed = "db"

// Options configure an Updater.
type Options struct {
	Records records.Config
	Zones   db.ZoneConfig
	// BatchWindow is the shortest time between the starts of two
	// commits (default 25 ms): a change after a quiet spell is
	// committed at once, and a burst gathers into one commit a window.
	BatchWindow time.Duration
	Logger      *slog.Logger
	Now         func() time.Time
	// Hysteresis is the self-removal policy (zero fields: RFD 1's 60 s
	// window and 600 s last-member delay).
	Hysteresis hysteresis.Policy
	// Guard is the guard on mass removals (zero fields: its defaults).
	Guard guard.Policy
	// LoadLater leaves reading which VMs the store holds and their
	// hysteresis state to Run, instead of NewUpdater. cns serve starts Run
	// once the zones' tables are built: at a million VMs the read takes
	// ~1.4 s of CPU and its maps make every collection of the warm-up
	// longer, on the one CPU the two would share. Until the read is done,
	// the methods that need it wait.
	LoadLater bool
	// HeapLimit is the Go heap's soft limit cns runs under, in bytes
	// (runtime/debug.SetMemoryLimit; 0: none): a backlog's chunks are
	// kept small enough to stay well within it (chunkForHeap).
	HeapLimit int64
}

// Both feeds report to the updater through dc.Sink.
var _ dc.Sink = (*Updater)(nil)

// Updater holds the data center as the sources last described it and
// commits what follows from it.
type Updater struct {
	store *db.DB
	log   *slog.Logger
	now   func() time.Time

	// forward is cfg's forward zone names in order, read without mu.
	forward atomic.Pointer[[]string]

	mu sync.Mutex // the rest
	naming
	model                       // the data center (model.go)
	hashes    map[string]uint64 // every stored VM: what its records and decision hash to
	sched     *scheduler        // the VMs to recompute (or delete), and what the next batch takes (scheduler.go)
	commit    committer         // (committer.go)
	causes    map[string]int    // why the pending batch exists, for the journal
	listingMu sync.Mutex        // one listing at a time
	kick      chan struct{}     // wakes Run
	feeds     map[string]FeedStatus
	health    *serviceHealth    // self-removal hysteresis (selfremoval.go)
	guard     removalGuard      // the guard on mass removals (removals.go)
	policy    hysteresis.Policy // health's, until it is read (load)
	seenDue   map[string]bool   // entries whose last-seen time is due for saving (lastseen.go)
	sources   []queuedSource    // aggregated sources' changes (sources.go)
	loaded    chan struct{}     // closed once hashes and health are read (load)
}

// naming is the naming and zone configuration. The zone config goes into
// a change set while zonesGen (raised by every change of it) is ahead of
// zonesSaved (the generation a commit stored): a change made while a
// commit is in flight is not lost.
type naming struct {
	cfg                  records.Config
	zones                db.ZoneConfig
	zonesGen, zonesSaved uint64
}

// NewUpdater returns an Updater writing to store. It reads which VMs the
// store holds, so a full listing can remove the ones that are gone (unless
// o.LoadLater leaves that to Run).
func NewUpdater(store *db.DB, o Options) (*Updater, error) {
	u := &Updater{
		store: store, log: o.Logger, now: o.Now, policy: o.Hysteresis, loaded: make(chan struct{}),
		naming: naming{cfg: o.Records, zones: o.Zones, zonesGen: 1}, model: newModel(),
		sched: newScheduler(testChunk(defaultChunk), defaultSlice), causes: map[string]int{},
		kick: make(chan struct{}, 1), feeds: map[string]FeedStatus{}, seenDue: map[string]bool{},
		guard: removalGuard{policy: o.Guard, fresh: map[guard.Cause]time.Time{}, unlisted: map[string]*unlistedVM{},
			epoch: time.Now().UnixNano()},
	}
	u.sched.maxChunk = chunkForHeap(o.HeapLimit)
	u.setForward()
	if u.log == nil {
		u.log = slog.Default()
	}
	u.commit = newCommitter(store, u.log, o.BatchWindow)
	if u.now == nil {
		u.now = db.Now // hysteresis times are stored: steps of the system clock must not move them
	}
	if u.commit.window == 0 {
		// While changes keep coming, one waits for the next window and
		// then for its commit: change → answer p99 is about a window and
		// a slow commit. Under 1,000 VM changes a second on one CPU
		// (bench/busydc.sh, 30-s runs) 50 ms gave a p99 of 106–120 ms and
		// 25 ms 77–92 ms (~100 ms over 60 s), at the same CPU. At start
		// the first drain also waits a window, so a first commit may hold
		// the networks without the VMs. The cost is up to 40 commits
		// (serials) a second, so the forward zone's 2,000 journal
		// entries cover 50 s of such churn.
		u.commit.window = 25 * time.Millisecond
	}
	if !o.LoadLater {
		if err := u.load(false); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// load reads which VMs the store holds and the hysteresis state, then lets
// the methods waiting in lock go on. It runs once. late (Run's read, after
// the warm-up's release of memory) hands its garbage and the file pages it
// read back to the system.
func (u *Updater) load(late bool) error {
	start := time.Now()
	// The hashes name every stored VM; reading them touches a few MB of
	// the file instead of every VM entry.
	hashes, err := u.store.VMHashes()
	if err != nil {
		return err
	}
	health, err := loadServiceHealth(u.store, u.policy, u.now(), u.log)
	if err != nil {
		return err
	}
	held, err := loadGuard(u.store, u.log)
	if err != nil {
		return err
	}
	if late {
		u.commit.releaseMemory()
	}
	u.log.Info("stored VMs read", "vms", len(hashes), "services", len(health.services), "took", time.Since(start).String())
	u.mu.Lock()
	u.hashes, u.health, u.guard.state = hashes, health, held
	u.mu.Unlock()
	close(u.loaded)
	return nil
}

// lock takes u.mu once the stored state is loaded: the entry points that
// read or mark VMs, or read the hysteresis state, take it with lock. Those
// that only queue or report (ReportFeed, SetSource, Feeds, Pending, ...)
// take u.mu at once, so the API and the feeds' health answer meanwhile.
func (u *Updater) lock() {
	<-u.loaded
	u.mu.Lock()
}

// SetConfig replaces the naming and zone configuration: every VM is
// recomputed and the zone apexes are updated in the next commit.
func (u *Updater) SetConfig(rc records.Config, zc db.ZoneConfig) {
	u.lock()
	defer u.mu.Unlock()
	u.cfg, u.zones = rc, zc
	u.setForward()
	u.zonesGen++
	u.markAll("configuration changed")
	u.wake()
}

// ForwardZones returns the forward zones' names in configuration order,
// the order a NIC's zones are tried. It does not wait for a commit.
func (u *Updater) ForwardZones() []string { return *u.forward.Load() }

// setForward records cfg's forward zone names for ForwardZones.
func (u *Updater) setForward() {
	names := make([]string, len(u.cfg.Zones))
	for i, z := range u.cfg.Zones {
		names[i] = z.Name
	}
	u.forward.Store(&names)
}

// stored reports whether the store holds an entry for uuid; u.mu is held.
// The hashes name every stored entry (a second set of a million UUIDs
// would cost ~40 MB at that size).
func (u *Updater) stored(uuid string) bool {
	_, ok := u.hashes[uuid]
	return ok
}
