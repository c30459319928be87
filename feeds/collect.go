package feeds

import (
	"context"
	"iter"
	"slices"
	"strings"

	"github.com/tritondatacenter/cns/db"
)

// What goes into the next batch, and when the updater lets go of its lock
// while it computes it: chunks of a backlog, slices of a chunk or of a
// reconcile, changes taken out of turn.

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

// next computes the next batch to commit, nil when there is nothing to
// commit; it takes u.mu for each slice of the work (maxVMsPerSlice).
// release tells the caller to hand memory back. With inFlight (a batch
// computed but not settled yet) it leaves out inFlight's VMs and, when
// inFlight took any, the queued sources.
//
// The feeds are not held up while a big batch is computed: a first
// load's chunk (1M VMs: up to 60k VMs, 1.3–2.7 s of computing) fills in
// slices. A change they bring meanwhile is committed first, in a batch of
// its own, and the chunk is parked until that batch is computed; it goes
// on with the next call, for a slice at least before it can be parked
// again, so the backlog goes on under steady changes. A restart's reconcile
// recomputes every VM to find most of them as stored (1M VMs: ~20 s): a
// slice that found changes is committed, so they are served while the
// reconcile goes on, and one that found nothing is followed by the next
// at once.
func (u *Updater) next(ctx context.Context, inFlight *batch) (b *batch, release bool) {
	u.mu.Lock()
	open := u.parked // parked for the batch before: it goes on now, a slice at least
	u.parked, u.paused = nil, false
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
		if open != nil && !resumed && u.parked == nil && !u.urgentCut && u.urgentBesides(open, inFlight) {
			u.parked, open = open, nil
		}
		resumed = false
		if u.listing {
			// A listing is being put (SetInventory), which wakes the
			// updater when it is in; a chunk in the making waits for it.
			if open != nil && u.parked == nil {
				u.parked = open
			}
			u.paused = true
			u.mu.Unlock()
			return nil, false
		}
		b, release = u.prepare(ctx, inFlight, open, before)
		if u.parked != nil && (b == nil || !b.open && b.empty()) {
			// The urgent VMs came to nothing to commit: the chunk goes on,
			// a slice at least before it can be parked again.
			open, u.parked, resumed = u.parked, nil, true
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

// urgentBesides reports whether a VM marked out of turn is held by
// neither open nor inFlight: a change to commit before the rest of open.
// (A VM either holds that was marked again is urgent too, to go right
// after that batch; parking open for it would only delay open.) u.mu is
// held.
func (u *Updater) urgentBesides(open, inFlight *batch) bool {
	for _, id := range u.urgent {
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
		// A batch's later slices take urgent VMs as the rest, without
		// ending: when next cannot park the chunk for a change, the change
		// joins it.
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
			outOfTurn := false
			switch {
			case len(u.urgent) > 0:
				uuid, u.urgent, outOfTurn = u.urgent[0], u.urgent[1:], true
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
