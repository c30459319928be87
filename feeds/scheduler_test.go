package feeds

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/tritondatacenter/cns/db"
)

// fakeWork is the scheduler's work as a table: every VM computes to a
// change unless unchanged says otherwise; owners are "", so VMs go in
// UUID order.
type fakeWork struct {
	unchanged  map[string]bool
	listingNow bool
	staleNow   bool
}

func (w *fakeWork) listing() bool             { return w.listingNow }
func (w *fakeWork) stale(*batch) bool         { return w.staleNow }
func (w *fakeWork) otherWork() bool           { return false }
func (w *fakeWork) sourcesPending() bool      { return false }
func (w *fakeWork) nothing(int)               {}
func (w *fakeWork) stopped() bool             { return false }
func (w *fakeWork) owner(string) string       { return "" }
func (w *fakeWork) stored() int               { return 0 }
func (w *fakeWork) finish(b, inFlight *batch) {}

func (w *fakeWork) newBatch(size int, inFlight *batch) *batch {
	return &batch{cs: &db.ChangeSet{}, picks: picks{gens: map[string]dirtyVM{}, size: size}}
}

func (w *fakeWork) compute(uuid string, b *batch) outcome {
	if w.unchanged[uuid] {
		return unchanged
	}
	b.cs.VMs = append(b.cs.VMs, db.VMChange{UUID: uuid})
	return changed
}

// describe is how a row names a step's outcome: the step, and for a batch
// its VMs (sorted) and what it says.
func describe(b *batch, st step) string {
	if b == nil {
		return st.String()
	}
	s := fmt.Sprintf("%v %v", st, slices.Sorted(maps.Keys(b.gens)))
	if b.backlog {
		s += " backlog"
	}
	if b.cut {
		s += " cut"
	}
	return s
}

// TestSchedulerTransitions drives the scheduler the way the updater does
// (begin a plan, step it slice by slice, commit its batch) through
// scripts of operations, each checked where it says "step" or "state":
//
//	mark x      a feed changed VM x
//	plan        begin the next batch (with the batch in flight, if any)
//	step WANT   compute a slice; WANT describes the outcome (describe)
//	fly         the batch just planned goes to the store (in flight)
//	settle      the batch in flight is committed
//	listing on  a listing is being put (off: it is in)
//	state WANT  the scheduler's state
//
// Each of the rows named after a bug fails with that bug put back.
func TestSchedulerTransitions(t *testing.T) {
	const ten = "a b c d e f g h i j"
	for _, row := range []struct {
		name         string
		chunk, slice int
		dirty        string // marked first, in this order
		unchanged    string // VMs that compute to what is stored
		script       []string
	}{
		{
			name: "a change when idle is committed at once", chunk: 4, slice: 10, dirty: "a",
			script: []string{"plan", "step Done [a]", "state Idle"},
		},
		{
			name: "a backlog goes in full chunks, each saying another follows, the last partial", chunk: 4, slice: 10, dirty: ten,
			script: []string{
				"plan", "step Done [a b c d] backlog", "state Backlog", "settle",
				"plan", "step Done [e f g h] backlog", "settle",
				"plan", "step Done [i j]", "state Idle", "settle",
				"plan", "step Done",
			},
		},
		{
			name: "a chunk is computed in slices, letting go between them", chunk: 4, slice: 2, dirty: ten,
			script: []string{"plan", "step Slice", "step Done [a b c d] backlog"},
		},
		{
			name: "the next chunk leaves out the one in flight", chunk: 4, slice: 10, dirty: ten,
			script: []string{"plan", "step Done [a b c d] backlog", "fly", "plan", "step Done [e f g h] backlog"},
		},
		{
			name: "a change during a backlog goes first, on its own, and says the backlog goes on", chunk: 4, slice: 10, dirty: ten,
			script: []string{
				"plan", "step Done [a b c d] backlog", "settle", "mark j",
				"plan", "step Done [j] backlog cut", "state OutOfTurnInBacklog", "settle",
				"plan", "step Done [e f g h] backlog", "state Backlog",
			},
		},
		{
			// bug: two out-of-turn batches in a row held the backlog up
			// under steady changes.
			name: "an out-of-turn batch is never followed by another", chunk: 4, slice: 10, dirty: ten,
			script: []string{
				"plan", "step Done [a b c d] backlog", "settle", "mark j",
				"plan", "step Done [j] backlog cut", "settle", "mark i",
				"plan", "step Done [e f g i] backlog", "state Backlog",
			},
		},
		{
			name: "a change while a chunk is computed parks the chunk; the chunk goes on after it", chunk: 4, slice: 2, dirty: ten,
			script: []string{
				"plan", "step Slice", "mark j",
				"step Done [j] backlog cut", "state OutOfTurnInBacklog, a chunk of 2 parked", "settle",
				"plan", "step Done [a b c d] backlog", "state Backlog",
			},
		},
		{
			// bug ebf4771: a VM of the chunk being computed that was
			// marked again parked the chunk at every slice.
			name: "a chunk is parked only for a change it does not hold itself", chunk: 4, slice: 2, dirty: ten,
			script: []string{"plan", "step Slice", "mark a", "step Done [a b c d] backlog", "state Backlog"},
		},
		{
			// bug b4ccb66: the chunk computed while the one before was
			// written popped that chunk's VM, marked again, skipped it,
			// and still ended after its first VM as if it had taken a
			// change out of turn.
			name: "an urgent VM skipped does not end the batch after its first VM", chunk: 4, slice: 10, dirty: ten,
			script: []string{
				"plan", "step Done [a b c d] backlog", "fly", "mark a",
				"plan", "step Done [e f g h] backlog", "state Backlog", "settle", "fly",
				"plan", "step Done [a] backlog cut", // a's turn comes after the chunk that held it
			},
		},
		{
			// bug 7db51b4: a listing during a backlog ended it (the empty
			// commit that has serve build every table, and a compaction).
			name: "a listing during a backlog pauses it, not ends it", chunk: 4, slice: 2, dirty: ten,
			script: []string{
				"plan", "step Slice", "step Done [a b c d] backlog", "fly",
				"plan", "step Slice", "listing on", "step PausedForListing", "state Backlog, a chunk of 2 parked",
				"settle", "listing off",
				"plan", "step Done [e f g h] backlog",
			},
		},
		{
			name: "a reconcile's slice that finds nothing to commit is followed at once", chunk: 100, slice: 3, dirty: ten, unchanged: "a b c d e f",
			script: []string{"plan", "step Slice", "step Slice", "step Slice", "step Done [g h i j]", "state Idle"},
		},
		{
			name: "a reconcile's slice with changes is committed, cut, and the rest follows", chunk: 100, slice: 3, dirty: ten, unchanged: "a b c e f g",
			script: []string{"plan", "step Slice", "step Slice", "step Done [d] cut", "state Idle", "settle", "plan", "step Done [h i j]"},
		},
		{
			name: "a config change between two slices drops the chunk", chunk: 4, slice: 2, dirty: ten,
			script: []string{"plan", "step Slice", "stale", "mark a", "mark b", "step Slice", "step Done [a b c d] backlog"},
		},
	} {
		t.Run(row.name, func(t *testing.T) {
			s := newScheduler(row.chunk, row.slice)
			w := &fakeWork{unchanged: map[string]bool{}}
			for _, id := range strings.Fields(row.unchanged) {
				w.unchanged[id] = true
			}
			for _, id := range strings.Fields(row.dirty) {
				s.mark(id, 0)
			}
			var p *plan
			var planned, inFlight *batch
			for i, op := range row.script {
				verb, arg, _ := strings.Cut(op, " ")
				switch verb {
				case "mark":
					s.mark(arg, 0)
				case "plan":
					p = s.begin(inFlight)
				case "step":
					b, st, _ := p.step(w)
					if got := describe(b, st); got != arg {
						t.Fatalf("op %d (%s): got %q", i, op, got)
					}
					w.staleNow = false
					if b != nil {
						planned = b
					}
				case "fly":
					inFlight = planned
				case "settle":
					if inFlight == nil {
						inFlight = planned
					}
					for id, m := range inFlight.gens {
						s.committed(id, m, 0)
					}
					inFlight = nil
				case "listing":
					w.listingNow = arg == "on"
				case "stale":
					w.staleNow = true
				case "state":
					if got := s.state.String(); got != arg {
						t.Fatalf("op %d (%s): state %q", i, op, got)
					}
				default:
					t.Fatalf("op %d: unknown %q", i, op)
				}
			}
		})
	}
}

// A backlog's chunk grows with the store by an eighth, up to six times
// the smallest, and a heap limit keeps it to limit/64 KiB VMs (never
// under a slice): the 1 GiB package's limit leaves a 100k-VM load's
// chunks as they are, a 2 GiB cgroup's halves a 1M-VM load's.
func TestChunkSize(t *testing.T) {
	const MiB = 1 << 20
	for _, tc := range []struct {
		limit  int64 // the heap's
		stored int
		want   int
	}{
		{0, 0, 10000},
		{0, 100000, 12500},
		{0, 1000000, 60000},
		{768 * MiB, 100000, 12288},   // the sdc_1024 package's 3/4
		{768 * MiB, 50000, 10000},    // (under the bound)
		{1536 * MiB, 1000000, 24576}, // a 2 GiB cgroup's
		{2304 * MiB, 1000000, 36864}, // a 3 GiB cgroup's
		{16384 * MiB, 1000000, 60000},
		{64 * MiB, 1000000, defaultSlice},
	} {
		s := newScheduler(defaultChunk, defaultSlice)
		s.maxChunk = chunkForHeap(tc.limit)
		if got := s.chunkSize(tc.stored); got != tc.want {
			t.Errorf("heap limit %d MiB, %d VMs stored: chunks of %d, want %d", tc.limit/MiB, tc.stored, got, tc.want)
		}
	}
}
