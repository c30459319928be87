package feeds

import (
	"context"

	"github.com/tritondatacenter/cns/db"
)

// The updater's side of planning a batch: the scheduler (scheduler.go)
// decides which VMs it takes and where it stops; the updater computes
// them (change), and completes a batch with the zone config, the sources
// and the hysteresis state it carries.

// next computes the next batch to commit, nil when there is nothing to
// commit; it takes u.mu for each slice of the work (the scheduler's
// slice). release tells the caller to hand memory back; paused, that it
// stopped for a listing being put (a backlog is not over). With inFlight
// (a batch computed but not settled yet) it leaves out inFlight's VMs
// and, when inFlight took any, the queued sources.
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
func (u *Updater) next(ctx context.Context, inFlight *batch) (b *batch, release, paused bool) {
	w := updaterWork{u, ctx}
	u.mu.Lock()
	p := u.sched.begin(inFlight)
	u.mu.Unlock()
	for {
		u.mu.Lock()
		b, st, rel := p.step(w)
		u.mu.Unlock()
		release = release || rel
		switch st {
		case stepPaused:
			return nil, release, true
		case stepDone:
			return b, release, false
		}
		if u.sched.hooks.betweenSlices != nil {
			u.sched.hooks.betweenSlices()
		}
	}
}

// updaterWork is the updater as the scheduler's work, for one call of
// next; u.mu is held whenever the scheduler calls it.
type updaterWork struct {
	u   *Updater
	ctx context.Context
}

func (w updaterWork) listing() bool       { return w.u.listing }
func (w updaterWork) stale(b *batch) bool { return b.zonesAt != w.u.zonesGen }
func (w updaterWork) stopped() bool       { return w.ctx.Err() != nil }
func (w updaterWork) stored() int         { return len(w.u.hashes) }
func (w updaterWork) sourcesPending() bool {
	return w.u.sourcesPending()
}

func (w updaterWork) otherWork() bool {
	u := w.u
	return u.zonesGen != u.zonesSaved || len(u.health.dirty) > 0 || u.sourcesPending() || u.guard.gen != u.guard.saved
}

func (w updaterWork) owner(uuid string) string {
	if v := w.u.vms[uuid]; v != nil {
		return v.owner
	}
	return ""
}

func (w updaterWork) newBatch(size int, inFlight *batch) *batch {
	u := w.u
	b := &batch{cs: &db.ChangeSet{Cause: u.causeSummary()}, at: u.now().UnixMilli(), computed: mono(), zonesAt: u.zonesGen, stored: len(u.hashes)}
	b.gens, b.size = map[string]dirtyVM{}, size
	if u.zonesGen != u.zonesSaved && (inFlight == nil || inFlight.zonesGen != u.zonesGen) {
		z := u.zones
		b.cs.Zones, b.zonesGen = &z, u.zonesGen
	}
	return b
}

func (w updaterWork) compute(uuid string, b *batch) outcome {
	u := w.u
	vc, ok, cand := u.change(uuid)
	o := changed
	switch {
	case !ok:
		o = skipped
	case !vc.Delete && vc.Hash == u.hashes[uuid]:
		o = unchanged
	default:
		b.cs.VMs = append(b.cs.VMs, vc)
		if !vc.Delete && u.vms[uuid] == nil {
			b.computeNodes++
		}
	}
	u.noteComputed(uuid, b, o, cand)
	return o
}

func (w updaterWork) finish(b, inFlight *batch) {
	u := w.u
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
	if inFlight == nil || inFlight.guardGen != u.guard.gen {
		u.stageGuard(b) // (an accept, the timer's confirmation)
	}
}

func (w updaterWork) nothing(unchanged int) {
	u := w.u
	u.log.Info("committed", "vms", 0, "unchanged", unchanged, "zones", 0, "pending", u.pending(), "took", "0s")
	if u.sched.pending() == 0 { // (inFlight's VMs stay dirty until it settles, with their causes)
		clear(u.causes)
	}
}
