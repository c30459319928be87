package feeds

import (
	"fmt"
	"iter"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The scheduler decides what the next batch takes from the dirty set, in
// which order, and where the computation of a batch stops for the updater
// to let go of its lock: chunks of a backlog, slices of a chunk or of a
// reconcile, changes taken out of turn. It holds the dirty set and its
// state, and nothing else: no lock, no clock, no goroutine. The updater
// calls it under its lock and computes each VM it is handed (work); the
// transition tests (scheduler_test.go) drive it the same way with a table
// of outcomes.

// A scheduler's sizes, unless tests give others.
const (
	// defaultChunk is a backlog's chunk while the store is small
	// (chunkSize grows it with the store, up to six times). A big
	// load's chunks write their names at random places of the name
	// buckets (names sort by owner, VMs come by UUID), so every chunk
	// rewrites most of those buckets' pages: the bytes a load writes grow
	// with the number of chunks (100k VMs: 1.1 GB written in chunks of
	// 5000, 0.44 GB in chunks of 20000, for a 0.3 GB file). A chunk's
	// transaction holds its VMs' records and the touched pages in memory,
	// beside the next chunk being computed, which is what bounds it: a
	// 100k-VM first load in chunks of 20,000 peaked at 750–840 MiB
	// resident, in these (10,000 to 12,500) at 585–600, for 453 MB
	// written instead of 304 and the same CPU time (BENCHMARKS.md,
	// "Memory of a first load").
	defaultChunk = 10000
	// defaultSlice is how many VMs the updater computes before it lets go
	// of its lock: a VM takes 30–45 µs to recompute (1M and 100k VMs), so
	// 60–90 ms. A reconcile's batch that has found as many as stored is
	// committed then (cut); any other batch goes on filling in the next
	// slice (open).
	defaultSlice = 2048
	// maxUrgent bounds the VMs marked during a backlog that go before the
	// rest of it: a feed's changes, a few a second. What a relisting or a
	// config change marks beyond it waits for the backlog's next
	// snapshot, in order (a million VMs out of order would scatter the
	// forward zone's writes).
	maxUrgent = 4096
)

// dirtyVM is a VM waiting to be recomputed: the generation of its latest
// mark (a batch computed before it is out of date), and since when its
// oldest change not yet committed has waited (mono, for the histogram of
// change latencies). No pointers: a first load holds a million.
type dirtyVM struct {
	gen   uint64
	since int64
}

// phase is what the batches before the next one were.
type phase uint8

const (
	// idle: no backlog is being worked through; the next batch takes
	// the dirty VMs in order, and may take changes out of turn.
	idle phase = iota
	// backlog: the last batch was a backlog's full chunk, and another
	// follows at once.
	backlog
	// outOfTurn: the last batch was cut after changes taken out of turn;
	// the next slice takes none out of turn (so the backlog goes on
	// under steady changes) and its batch is not parked.
	outOfTurn
	// outOfTurnInBacklog: outOfTurn, between a backlog's chunks or before
	// the rest of a parked chunk: the batch said that more follows.
	outOfTurnInBacklog
)

func (p phase) String() string {
	return [...]string{"Idle", "Backlog", "OutOfTurn", "OutOfTurnInBacklog"}[p]
}

// inBacklog reports whether the last batch said another follows at once.
func (p phase) inBacklog() bool { return p == backlog || p == outOfTurnInBacklog }

// afterOutOfTurn reports whether the last batch took changes out of turn.
func (p phase) afterOutOfTurn() bool { return p == outOfTurn || p == outOfTurnInBacklog }

// state is a scheduler's state: the phase, and the chunk set aside
// (parked) for a batch of changes taken out of turn, which goes on with
// the next call of plan.
type state struct {
	phase  phase
	parked *batch
}

func (s state) String() string {
	if s.parked != nil {
		return fmt.Sprintf("%v, a chunk of %d parked", s.phase, len(s.parked.gens))
	}
	return s.phase.String()
}

// picks is what the scheduler knows of a batch: the VMs it took that
// changed, with their marks, and where its computation stands.
type picks struct {
	gens      map[string]dirtyVM // each changed VM's mark when the batch took it
	unchanged int                // VMs recomputed to what the store holds already
	// before: VMs found as stored by the slices before the batch that
	// had nothing to commit (logged with it).
	before int
	size   int // the VMs a full chunk holds
	// cut: the batch ended before it was full, with dirty VMs left that
	// follow at once (a reconcile's slice that found maxVMsPerSlice VMs
	// as stored, or a batch of changes taken out of turn).
	cut bool
	// open: the batch is not full and more dirty VMs are left; its next
	// slice follows once the lock has been let go.
	open bool
	// backlog: another commit follows at once (db.ChangeSet.Backlog).
	backlog bool
}

// outcome is what computing one VM came to.
type outcome uint8

const (
	changed   outcome = iota // a change to commit: in the batch
	unchanged                // as stored: settled
	skipped                  // cannot be computed now (owner unknown): its records stay
)

// work is what the scheduler asks of the updater while it plans; the
// updater's lock is held.
type work interface {
	// listing reports whether a listing is being put: no batch then.
	listing() bool
	// stale reports whether b was begun under another zone config.
	stale(b *batch) bool
	// otherWork reports whether zones, hysteresis or sources wait.
	otherWork() bool
	sourcesPending() bool
	// newBatch begins a batch of at most size VMs.
	newBatch(size int, inFlight *batch) *batch
	// compute computes VM uuid into b.
	compute(uuid string, b *batch) outcome
	// finish completes b, the last of its slices computed: the sources
	// and the hysteresis state it carries.
	finish(b, inFlight *batch)
	// nothing is told that the work came to nothing to commit, with the
	// VMs found as stored.
	nothing(unchanged int)
	// stopped reports whether computing is to stop (a shutdown).
	stopped() bool
	// owner returns the owner of a VM held, "" for one not held.
	owner(uuid string) string
	// stored is how many VMs the store holds (chunkSize).
	stored() int
}

// scheduler holds the dirty set and decides what each batch takes.
type scheduler struct {
	chunk, slice int
	maxChunk     int // the heap's bound on a chunk (chunkForHeap); 0: none
	dirty        map[string]dirtyVM
	gen          uint64
	// order is the rest of a sorted snapshot of the dirty set (plan),
	// and urgent the VMs marked while it was being worked through: they
	// go before it.
	order, urgent []string
	state         state
	burst         int   // VMs computed since the dirty set was last empty
	hooks         hooks // tests'
}

// hooks run, when set (tests), where the updater lets go of its lock
// between two slices: of a batch (next), of a listing (SetInventory).
type hooks struct{ betweenSlices, betweenListingSlices func() }

// testChunk is CNS_TEST_CHUNK_VMS, or def: the whole-program power-cut
// test (secondaries_powercut_test.go) loads in small chunks, as a large data
// center's first load is loaded. Not documented for operators.
func testChunk(def int) int {
	if n, err := strconv.Atoi(os.Getenv("CNS_TEST_CHUNK_VMS")); err == nil && n > 0 {
		return n
	}
	return def
}

// newScheduler returns a scheduler of backlogs in chunks of chunk VMs
// (chunkSize), computed in slices of slice VMs.
func newScheduler(chunk, slice int) *scheduler {
	return &scheduler{chunk: chunk, slice: slice, dirty: map[string]dirtyVM{}}
}

// mark queues uuid for the next commit; now is mono().
func (s *scheduler) mark(uuid string, now int64) {
	s.gen++
	d, ok := s.dirty[uuid]
	if !ok {
		d.since = now
	}
	d.gen = s.gen
	s.dirty[uuid] = d
	if len(s.order) > 0 && len(s.urgent) < maxUrgent {
		// A backlog is being worked through in its sorted order: a
		// change now goes before the rest of it (take).
		s.urgent = append(s.urgent, uuid)
	}
}

// marked is uuid's mark in the dirty set (zero when it is not dirty).
func (s *scheduler) marked(uuid string) dirtyVM { return s.dirty[uuid] }

// pending is how many VMs wait.
func (s *scheduler) pending() int { return len(s.dirty) }

// sizeFor makes the dirty set of a first listing with room for n VMs.
func (s *scheduler) sizeFor(n int) {
	if len(s.dirty) == 0 {
		s.dirty = make(map[string]dirtyVM, n)
	}
}

// committed settles a VM whose mark, as a batch took it (taken), is
// stored: it leaves the dirty set unless it was marked again meanwhile,
// when its wait counts from computed (when the batch was computed: at
// most that early).
func (s *scheduler) committed(uuid string, taken dirtyVM, computed int64) {
	d, ok := s.dirty[uuid]
	switch {
	case !ok:
	case d.gen == taken.gen:
		delete(s.dirty, uuid)
	default:
		d.since = computed
		s.dirty[uuid] = d
	}
}

// bigBurst is the number of VMs computed in one go (a start, a full
// listing, a config change) after which memory is handed back.
const bigBurst = 10000

// endOfBurst reports, once nothing is pending (no dirty VM, no source
// waiting), whether the burst that emptied the dirty set was big.
func (s *scheduler) endOfBurst(sourcesPending bool) bool {
	if len(s.dirty) > 0 || sourcesPending {
		return false
	}
	big := s.burst >= bigBurst
	s.burst = 0
	if big {
		// A map keeps its largest size, and the emptied order its array:
		// after a million VMs, 84 and 16 MB of heap (measured apart).
		s.dirty, s.order, s.urgent = map[string]dirtyVM{}, nil, nil
	}
	return big
}

// chunkSize is how many VMs the next chunk takes: s.chunk, or an eighth
// of the VMs stored, up to six times s.chunk. Every chunk rewrites pages
// all over the buckets it does not append to (reverse zones, the VMs by
// UUID), so once the store is large a bigger chunk rewrites fewer pages
// per VM. A first load of 1M VMs (bench/load.sh, medians of 2, in UUID
// order): 20k chunks, 51 commits, 10.9 GB written, 11.2k VMs/s, peak RSS
// 5.7 GB; growing with the store to 60k, 23 commits, 6.5 GB, 13.3k
// VMs/s, 7.5 GB. Uncapped they made 14.3k VMs/s for 9.1 GB peak. In
// owner order a cap of five times gained 2 % for 1.4 GB more peak. Up to
// 100k VMs the chunks stay at 10,000 to 12,500 (defaultChunk).
//
// Under a heap limit a chunk is also kept to maxChunk (chunkForHeap).
func (s *scheduler) chunkSize(stored int) int {
	n := min(max(s.chunk, stored/8), 6*s.chunk)
	if s.maxChunk > 0 {
		n = min(n, s.maxChunk)
	}
	return n
}

// chunkHeapPerVM is how much of the heap limit a chunk's VM is given
// (chunkForHeap): a chunk in flight swings the live heap by ~8 KB a VM
// (its computed records, the transaction's names and journal, the next
// chunk computed meanwhile; a 1M-VM first load's chunks of 60,000 took
// it from 1.1 to 1.6 GB with each commit), so a chunk of limit/64 KiB
// VMs swings it by an eighth of the limit at most.
const chunkHeapPerVM = 64 << 10

// chunkForHeap is the largest chunk under a heap limit of limit bytes (0:
// none), and never under a slice: under the 1 GiB package's limit (768
// MiB) 12,288 VMs, the chunks a 100k-VM load takes anyway; under a 2 GiB
// cgroup's (1.5 GiB) 24,576, where a 1M-VM first load's chunks of 60,000
// took the heap past the cgroup and the process was killed. Smaller
// chunks cost more commits, each rewriting the pages of the reverse
// zones and the VMs by UUID: a load under a tight limit is slower, not
// killed.
func chunkForHeap(limit int64) int {
	if limit <= 0 {
		return 0
	}
	return max(int(limit/chunkHeapPerVM), defaultSlice)
}

// step is what one slice of planning came to.
type step uint8

const (
	// stepSlice: a slice was computed; the next follows once the lock has
	// been let go.
	stepSlice step = iota
	// stepDone: the plan is made: the batch (nil: nothing to commit).
	stepDone
	// stepPaused: a listing is being put; the plan waits for it (a chunk
	// in the making is parked), and a backlog is not over.
	stepPaused
)

func (s step) String() string { return [...]string{"Slice", "Done", "PausedForListing"}[s] }

// plan is one call of the updater's next: the batch being computed in
// slices, and what the slices before it found.
type plan struct {
	s        *scheduler
	inFlight *batch // computed, not settled yet: its VMs are not taken again
	open     *batch // the batch being computed
	// resumed: open was parked, or came back because the batch of
	// changes taken out of turn came to nothing: it computes a slice
	// before it can be parked again.
	resumed bool
	before  int // found as stored by the slices before, which had nothing to commit
}

// begin starts planning the next batch: a chunk parked for the batch
// before goes on now, a slice at least.
func (s *scheduler) begin(inFlight *batch) *plan {
	p := &plan{s: s, inFlight: inFlight, open: s.state.parked}
	s.state.parked = nil
	p.resumed = p.open != nil
	return p
}

// step computes the next slice of the plan. With stepDone, b is the batch
// to commit (nil: none), and release tells the caller to hand memory back.
func (p *plan) step(w work) (b *batch, st step, release bool) {
	s := p.s
	open := p.open
	if open != nil && w.stale(open) {
		// The configuration changed: what open computed is out of date.
		// Its VMs are still dirty (every one marked again).
		open = nil
	}
	if open != nil && !p.resumed && s.state.parked == nil && !s.state.phase.afterOutOfTurn() && s.urgentBesides(open, p.inFlight) {
		s.state.parked, open = open, nil
	}
	p.resumed = false
	if w.listing() {
		// A listing is being put, which wakes the updater when it is
		// in; a chunk in the making waits for it.
		if open != nil && s.state.parked == nil {
			s.state.parked = open
		}
		p.open = nil
		return nil, stepPaused, false
	}
	b, release = s.prepare(w, p.inFlight, open, p.before)
	if s.state.parked != nil && (b == nil || !b.open && b.empty()) {
		// The changes out of turn came to nothing to commit: the chunk
		// goes on, a slice at least before it can be parked again.
		p.open, s.state.parked, p.resumed = s.state.parked, nil, true
		if b != nil {
			p.open.before += b.before + b.unchanged
		}
		return nil, stepSlice, release
	}
	switch {
	case b == nil:
		return nil, stepDone, release
	case b.open:
		p.open = b
	case b.empty() && b.cut:
		p.open, p.before = nil, b.before+b.unchanged
	default:
		return b, stepDone, release
	}
	return nil, stepSlice, release
}

// urgentBesides reports whether a VM marked out of turn is held by
// neither open nor inFlight: a change to commit before the rest of open.
// (A VM either holds that was marked again is urgent too, to go right
// after that batch; parking open for it would only delay open.)
func (s *scheduler) urgentBesides(open, inFlight *batch) bool {
	for _, id := range s.urgent {
		if _, held := open.gens[id]; held {
			continue
		}
		if inFlight != nil {
			if _, held := inFlight.gens[id]; held {
				continue
			}
		}
		return true
	}
	return false
}

// prepare computes the next slice of work: of the batch open, or of a
// new one. It returns an open batch when more of it follows, an empty one
// when a reconcile's slice found nothing to commit (cut), and nil when
// there is nothing to commit; before counts the VMs found as stored by
// the slices before.
func (s *scheduler) prepare(w work, inFlight, open *batch, before int) (b *batch, release bool) {
	if open == nil && len(s.dirty) == 0 && !w.otherWork() {
		return nil, false
	}
	b = s.collect(w, open, inFlight)
	if open == nil {
		b.before = before
	}
	if b.open || !b.empty() {
		return b, false
	}
	if b.cut && !w.stopped() {
		return b, false // the reconcile goes on
	}
	unchanged := b.before + b.unchanged
	if inFlight != nil && unchanged == 0 {
		return nil, false // settling inFlight ends the burst (and logs)
	}
	// Nothing to commit: say so when VMs were found as stored (the end of
	// a reconcile, which may have outlasted inFlight's commit).
	w.nothing(unchanged)
	return nil, s.endOfBurst(w.sourcesPending())
}

// collect computes the next slice of open (nil: a new batch). A very
// large batch (a first start, a config change) is committed in chunks of
// changed VMs: each chunk is consistent, and the write transaction's
// memory stays bounded. inFlight, when not nil, is a batch on its way to
// the store: its VMs are not taken again.
func (s *scheduler) collect(w work, open, inFlight *batch) *batch {
	b := open
	if b == nil {
		b = w.newBatch(s.chunkSize(w.stored()), inFlight)
	}
	b.open = false
	cutForUrgent := false
	for uuid := range s.take(w, b, inFlight, &cutForUrgent) {
		mark := s.dirty[uuid]
		switch w.compute(uuid, b) {
		case skipped:
			delete(s.dirty, uuid)
		case unchanged:
			delete(s.dirty, uuid)
			b.unchanged++
		case changed:
			b.gens[uuid] = mark
		}
	}
	if b.open {
		s.state.phase = s.state.phase.inBacklogOnly()
		return b
	}
	// Backlog: changed VMs alone fill the chunk, so the next one follows
	// at once; or changes taken out of turn between a backlog's chunks,
	// or before the rest of one (parked), which follows. (serve leaves a
	// backlog's zones to the store until it ends: a batch that did not
	// say so had it build every table of a first load again, 100k VMs:
	// ~0.4 s of CPU.) An aggregated source's chunks do not count: drain
	// takes a source's next part only after this one landed.
	switch {
	case cutForUrgent:
		b.backlog = b.cut && (s.state.phase.inBacklog() || s.state.parked != nil)
		s.state.phase = outOfTurn
		if b.backlog {
			s.state.phase = outOfTurnInBacklog
		}
	default:
		b.backlog = len(b.gens) >= b.size
		s.state.phase = idle
		if b.backlog {
			s.state.phase = backlog
		}
	}
	w.finish(b, inFlight)
	s.burst += len(b.cs.VMs) + b.unchanged
	return b
}

// inBacklogOnly is p after a slice that took nothing out of turn and did
// not end its batch: an out-of-turn batch is no longer the last slice.
func (p phase) inBacklogOnly() phase {
	switch p {
	case outOfTurn:
		return idle
	case outOfTurnInBacklog:
		return backlog
	}
	return p
}

// take yields the dirty VMs collect takes next, by owner then UUID
// (dirtyOrder), until b is full, or until this slice has yielded s.slice
// VMs (b.open), or, in a reconcile, until b has found that many as stored
// (b.cut); not those already in b or in inFlight; no more once w has
// stopped. The order comes from a sorted snapshot of the dirty set that
// the chunks of a backlog share (sorting a million VMs for every chunk of
// 20,000 would cost more than the chunk); VMs marked after it was taken
// come first if they are few (urgent: a change during a long backlog), in
// a second snapshot otherwise, taken when the first runs out. A batch
// that took VMs out of turn ends after them (cutForUrgent).
func (s *scheduler) take(w work, b, inFlight *batch, cutForUrgent *bool) iter.Seq[string] {
	return func(yield func(string) bool) {
		var busy []string // VMs in flight marked again since: urgent after this batch
		defer func() { s.urgent = append(s.urgent, busy...) }()
		fresh, urgent := false, false
		// A batch's later slices take urgent VMs as the rest, without
		// ending: when the plan cannot park the chunk for a change, the
		// change joins it.
		continued := len(b.gens) > 0
		afterOutOfTurn := s.state.phase.afterOutOfTurn()
		yielded := 0
		for n := 0; len(b.gens) < b.size; n++ {
			if n%256 == 0 && w.stopped() {
				return // stopping: drain drops the batch
			}
			// A change taken out of turn is committed at once, not after
			// the rest of a slice or chunk; but not twice in a row, so
			// that the backlog goes on under steady changes.
			more := len(s.dirty) > len(b.gens)
			switch {
			case b.unchanged >= s.slice:
				b.cut = more
				return
			case yielded >= s.slice:
				b.open = more
				return
			case urgent && len(s.urgent) == 0 && len(b.gens) > 0 && !continued && !afterOutOfTurn:
				b.cut, *cutForUrgent = more, true
				return
			}
			var uuid string
			outOfTurn := false
			switch {
			case len(s.urgent) > 0:
				uuid, s.urgent, outOfTurn = s.urgent[0], s.urgent[1:], true
			case len(s.order) > 0:
				uuid, s.order = s.order[0], s.order[1:]
			case fresh:
				return
			default:
				s.order, fresh = s.dirtyOrder(w), true
				continue
			}
			mark, dirty := s.dirty[uuid]
			if !dirty {
				continue // settled since the snapshot
			}
			if taken, inBatch := b.gens[uuid]; inBatch {
				if continued && taken.gen != mark.gen {
					busy = append(busy, uuid) // marked again since an earlier slice took it
				}
				continue
			}
			if elsewhere, marked := s.takenElsewhere(uuid, mark, b, inFlight); elsewhere {
				if marked {
					busy = append(busy, uuid) // marked again since: its turn after that batch
				}
				continue
			}
			// (A VM of the urgent list that is skipped here, in a batch
			// marked again, does not count: the batch would end after the
			// first VM of the backlog it took.)
			urgent = urgent || outOfTurn
			yielded++
			if !yield(uuid) {
				return
			}
		}
	}
}

// takenElsewhere reports whether uuid is in the batch in flight or in the
// parked one (another than b), and whether it was marked again since.
func (s *scheduler) takenElsewhere(uuid string, mark dirtyVM, b, inFlight *batch) (taken, marked bool) {
	for _, o := range [...]*batch{inFlight, s.state.parked} {
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
// holds one of them.
func (s *scheduler) dirtyOrder(w work) []string {
	type ownedVM struct{ owner, uuid string }
	vms := make([]ownedVM, 0, len(s.dirty))
	for uuid := range s.dirty {
		vms = append(vms, ownedVM{w.owner(uuid), uuid})
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
