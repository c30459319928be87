package feeds

import (
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/guard"
	"github.com/tritondatacenter/cns/feeds/records"
)

// The updater's side of the guard on mass removals (package guard holds
// the rules). Computing a VM notes when its change would take names for
// a guarded cause (a candidate): its compute node down, its owner's flag
// off, or missing from a complete listing. Before a batch is stored
// (guardRemovals, the one point between computing and committing), the
// candidates the store lists are the removals; the guard holds some, and
// their changes stay out of the batch: the store keeps their names. The
// held VMs leave the dirty set as if stored; computed again (the model
// changed them), they are computed as if their cause were not so
// (listedChange), and all of them as they are when the guard lets them
// go. A hold that a slow collapse begins recalls the removals the window
// applied: those VMs are marked, and computed as held, so their names
// come back; what the model held of a VM a listing left out is kept for
// that until the window is over (unlisted). A held VM and a VM that is
// not at one instance name or PTR: the held one is let go alone, in that
// batch (heldnames.go). The self-removal hysteresis hears of a
// candidate's removal from its services only once the guard lets it
// through: a held VM is still served, and counts as a member. The state
// rides in the change set (db.ChangeSet.Guard), so a restart neither
// forgets a hold nor applies it.

// removalGuard is the guard's state in the updater; u.mu guards it.
type removalGuard struct {
	policy guard.Policy
	state  *guard.Guard
	// gen counts the state's changes; saved is the gen a commit stored.
	gen, saved uint64
	// fresh is when each cause's upstream last answered (a CNAPI
	// listing, a UFDS answer, a complete listing or the inventory file
	// checked): what confirms a hold.
	fresh map[guard.Cause]time.Time
	// unlisted are the VMs forgotten because a complete listing did not
	// list them, with that listing, until their deletion is stored and a
	// hold can no longer recall them (pruneUnlisted).
	unlisted map[string]*unlistedVM
	// deleted are the unlisted VMs whose deletion is stored, oldest
	// first: their facts go once the window is over.
	deleted []deletedVM
	// listings numbers the complete listings applied; epoch tells this
	// process's apart from those of a run before, whose removals may
	// still be in the window.
	listings uint64
	epoch    int64
}

// unlistedVM is a VM a complete listing did not list.
type unlistedVM struct {
	// listing is the first listing that missed it: the removal's group
	// (the guard counts each listing's apart).
	listing string
	// vm is what the model held of it (nil: only the store held it),
	// kept so that a hold can compute it as listed: a held VM whose
	// records a commit lost (recalled) gets them back.
	vm *storedVM
	// deleted is when its deletion was stored (zero: not yet).
	deleted time.Time
}

// deletedVM is an unlisted VM whose deletion a commit stored at a time.
type deletedVM struct {
	uuid string
	at   time.Time
}

// candidate is a VM whose computed change would take names for a
// guarded cause, if the store lists it.
type candidate struct {
	removal guard.Removal
	// instance and services: the names the change keeps.
	instance, services bool
	// report is its hard removal from its services, which the
	// hysteresis hears of only if the guard lets the removal go through:
	// a held VM is still served as a member (nil: it is in none).
	report *memberReport
	// asHeld: the guard holds this removal already, and the change was
	// computed as if its cause were not so (listedChange): nothing for
	// the guard to decide, the VM stays held.
	asHeld bool
}

// loadGuard reads the stored guard state; one that does not decode is
// dropped with an error (nothing is held then: the store keeps what it
// serves until a removal comes again).
func loadGuard(store *db.DB, log *slog.Logger) (*guard.Guard, error) {
	b, err := store.Guard()
	if err != nil || b == nil {
		return guard.New(), err
	}
	g, err := guard.Decode(b)
	if err != nil {
		log.Error("removal guard state unreadable; starting clear", "err", err)
		return guard.New(), nil
	}
	return g, nil
}

// candidateOf says whether a VM's listing decision takes names for a
// guarded cause: every name when its owner's flag is off, its service
// names when its compute node is down.
func candidateOf(uuid, owner, server string, d *records.Decision) *candidate {
	c := &candidate{instance: d.ListInstance, services: d.ListServices}
	switch {
	case !d.ListInstance && (slices.Contains(d.Reasons, records.ReasonUserEnFlag) || slices.Contains(d.Reasons, records.ReasonUserNotApproved)):
		c.removal = guard.Removal{VM: uuid, Cause: guard.OwnerOff, Group: owner}
	case !d.ListServices && slices.Contains(d.Reasons, records.ReasonCNDown):
		c.removal = guard.Removal{VM: uuid, Cause: guard.CNDown, Group: server}
	default:
		return nil
	}
	return c
}

// noteComputed records, for the guard, what computing uuid into b came
// to: a candidate, or a held VM computed to something else (kept). u.mu
// is held.
func (u *Updater) noteComputed(uuid string, b *batch, o outcome, c *candidate) {
	switch {
	case c == nil || c.asHeld:
	case o == changed:
		b.candidates = append(b.candidates, *c)
	case c.report != nil:
		u.reportRemoval(uuid, c.report) // nothing for the guard: as stored
	}
	cause, held := u.guard.state.Held(uuid)
	switch {
	case !held || c != nil && c.asHeld:
	case o == skipped:
		if !u.stored(uuid) {
			b.kept = append(b.kept, uuid) // nothing stored to keep: gone meanwhile
		}
	case o != changed || c == nil || c.removal.Cause != cause:
		b.kept = append(b.kept, uuid)
	}
}

// removes reports whether a VM whose stored meta is m loses names to c.
func (c *candidate) removes(m *VMMeta) bool {
	inst := m.ListInstance
	svcs := m.ListServices && len(m.Services) > 0
	return inst && !c.instance || svcs && !c.services
}

// guardRemovals is the guard's turn on b, before it is stored: the
// removals it holds leave b (b.held), the hysteresis hears of those it
// lets through, and the state goes with b when it changed. It runs
// before the next batch is computed, which then sees what the guard
// decided. u.mu is not held.
func (u *Updater) guardRemovals(b *batch) {
	more := b.fullChunk() || b.cut // (as finish saw b)
	removals := u.removalsOf(b)
	claims := u.nameClaims(b)
	u.mu.Lock()
	defer u.mu.Unlock()
	g := &u.guard
	var v guard.Verdict
	if len(removals) > 0 || len(b.kept) > 0 || g.state.Holding() {
		v = g.policy.Step(g.state, guard.Batch{Now: u.now(), VMs: b.stored, Removals: removals, Kept: b.kept, Fresh: g.fresh,
			Recallable: u.recallable})
	}
	var held map[string]db.VMChange // what the guard took out of b
	if len(v.Hold) > 0 {
		kept := b.cs.VMs[:0:0]
		if len(claims) > 0 {
			held = map[string]db.VMChange{}
		}
		for _, vc := range b.cs.VMs {
			if !v.Hold[vc.UUID] {
				kept = append(kept, vc)
				continue
			}
			b.held = append(b.held, vc.UUID)
			if held != nil {
				held[vc.UUID] = vc
			}
		}
		b.cs.VMs = kept
	}
	u.yieldNames(b, claims, v.Hold, held)
	u.reportRemovals(b, v.Hold, more)
	u.guardVerdict(v)
	u.stageGuard(b)
}

// reportRemovals tells the hysteresis of the hard removals of b's
// candidates that go through: not those held, whose VMs are still served
// as members. What it changed goes with b (finish staged the state as
// computed). u.mu is held.
func (u *Updater) reportRemovals(b *batch, held map[string]bool, more bool) {
	reported := false
	for i := range b.candidates {
		c := &b.candidates[i]
		if c.report != nil && !held[c.removal.VM] {
			u.reportRemoval(c.removal.VM, c.report)
			reported = true
		}
	}
	if reported {
		b.cs.Hysteresis, b.healthGens = u.health.writes(nil, more) // (the batch before has settled)
	}
}

// removalsOf returns b's candidates that the store lists: its removals.
// A store that cannot be read makes every candidate one (held rather
// than lost).
func (u *Updater) removalsOf(b *batch) []guard.Removal {
	if len(b.candidates) == 0 {
		return nil
	}
	byVM := make(map[string]*candidate, len(b.candidates))
	uuids := make([]string, 0, len(b.candidates))
	for i := range b.candidates {
		c := &b.candidates[i]
		byVM[c.removal.VM] = c
		uuids = append(uuids, c.removal.VM)
	}
	slices.Sort(uuids)
	var out []guard.Removal
	err := u.store.VMMetas(uuids, func(uuid string, meta []byte) error {
		m, err := DecodeVMMeta(meta)
		if c := byVM[uuid]; err != nil || c.removes(m) {
			out = append(out, c.removal)
		}
		return nil
	})
	if err != nil {
		u.log.Warn("reading the stored VMs for the removal guard failed; every candidate counts", "err", err)
		out = out[:0]
		for _, uuid := range uuids {
			out = append(out, byVM[uuid].removal)
		}
	}
	return out
}

// stageGuard puts the guard's state in b when it changed since stored;
// u.mu is held.
func (u *Updater) stageGuard(b *batch) {
	if g := &u.guard; g.gen != g.saved {
		b.cs.Guard, b.guardGen = g.state.Encode(), g.gen
	}
}

// recallable reports whether the VM uuid can be computed as held: the
// model holds it, or what it held of it before a listing left it out is
// kept. u.mu is held.
func (u *Updater) recallable(uuid string) bool {
	if u.vms[uuid] != nil {
		return true
	}
	gone := u.guard.unlisted[uuid]
	return gone != nil && gone.vm != nil
}

// guardVerdict acts on a verdict: the VMs let go are computed again
// (their removals go through), so are the VMs recalled (as held: their
// names come back), and every event is logged; u.mu is held.
func (u *Updater) guardVerdict(v guard.Verdict) {
	g := &u.guard
	if v.Changed {
		g.gen++
	}
	for _, vm := range v.Apply {
		u.mark(vm)
	}
	if len(v.Apply) > 0 {
		u.causes["held removals applied"]++
		u.wake()
	}
	for _, vm := range v.Recall {
		u.mark(vm)
	}
	if len(v.Recall) > 0 {
		u.causes["removals recalled"]++
		u.wake()
	}
	p := g.policy.Normal()
	for _, e := range v.Events {
		attrs := []any{"cause", string(e.Cause), "action", string(e.Action), "vms", e.VMs, "of", e.Of, "what", e.Cause.Text()}
		switch e.Action {
		case guard.ActionHeld:
			s := g.state.Causes[e.Cause]
			attrs = append(attrs, "applied_in_window", e.Window, "recalled", e.Recalled, "window", p.Window.String(), "min_vms", p.MinVMs, "percent", p.Percent,
				"confirm_at", p.ConfirmAt(s).UTC().Format(time.RFC3339), "upstream", e.Cause.Upstream())
			u.log.Error("removals held: the names stay until the upstream confirms them or an operator accepts them (cnsadm feeds accept)", attrs...)
		case guard.ActionReleased:
			attrs = append(attrs, "left", e.Left)
			u.log.Warn("held removals released: the upstream recovered", attrs...)
		case guard.ActionYielded:
			// (logged VM by VM: yieldNames)
		default:
			u.log.Warn("held removals applied", attrs...)
		}
	}
}

// guardSettled records that b's guard state is stored; u.mu is held.
func (u *Updater) guardSettled(b *batch) {
	if b.cs.Guard != nil {
		u.guard.saved = max(u.guard.saved, b.guardGen)
	}
	now := u.now()
	for _, vc := range b.cs.VMs {
		if gone := u.guard.unlisted[vc.UUID]; gone != nil && vc.Delete {
			if gone.vm == nil {
				delete(u.guard.unlisted, vc.UUID) // nothing to recall it by
				continue
			}
			gone.deleted = now
			u.guard.deleted = append(u.guard.deleted, deletedVM{uuid: vc.UUID, at: now})
		}
	}
	u.pruneUnlisted(now)
	for _, uuid := range b.held {
		u.sched.committed(uuid, b.gens[uuid], b.computed) // kept as stored, until computed again
	}
}

// pruneUnlisted forgets the unlisted VMs deleted longer than the window
// ago, which a hold can no longer recall, but those held (recalled: their
// deletion is to be stored again); u.mu is held.
func (u *Updater) pruneUnlisted(now time.Time) {
	g := &u.guard
	since := now.Add(-g.policy.Normal().Window)
	n := 0
	for ; n < len(g.deleted) && g.deleted[n].at.Before(since); n++ {
		d := g.deleted[n]
		if gone := g.unlisted[d.uuid]; gone != nil && gone.deleted.Equal(d.at) {
			if _, held := g.state.Held(d.uuid); !held {
				delete(g.unlisted, d.uuid)
			}
		}
	}
	g.deleted = g.deleted[n:]
	if len(g.deleted) == 0 {
		g.deleted = nil // (let go of a collapse's array)
	}
}

// upstreamAnswered records that the upstream of causes answered (fresh
// data for a hold) and moves the holds on; u.mu is held.
func (u *Updater) upstreamAnswered(causes ...guard.Cause) {
	now := u.now()
	for _, c := range causes {
		u.guard.fresh[c] = now
	}
	u.advanceGuard()
}

// advanceGuard moves the holds on with time and the upstreams' answers,
// and forgets the removals the window no longer counts; u.mu is held.
func (u *Updater) advanceGuard() {
	if g := u.guard.state; g == nil || !g.Holding() && !g.Counting() {
		return
	}
	u.guardVerdict(u.guard.policy.Advance(u.guard.state, u.now(), u.guard.fresh))
}

// guardFeeds maps the feeds whose healthy answers are fresh data for a
// cause: CNAPI's listing (sdc.HealthCNAPI), UFDS (sdc.HealthUFDS), the
// inventory file (file.FeedName). A complete VMAPI listing counts
// through SetInventory, not its health: VMAPI also answers single VMs.
var guardFeeds = map[string]guard.Cause{"cnapi": guard.CNDown, "ufds": guard.OwnerOff, "inventory_file": guard.Unlisted}

// AcceptRemovals applies the removals held for cause (every cause when
// empty) now: an operator's word. It returns how many VMs that lets go.
func (u *Updater) AcceptRemovals(cause string) (int, error) {
	u.lock()
	defer u.mu.Unlock()
	v, err := u.guard.policy.Accept(u.guard.state, guard.Cause(cause), u.now())
	if err != nil {
		return 0, err
	}
	u.guardVerdict(v)
	if v.Changed {
		u.wake() // the state is stored with the next commit
	}
	return len(v.Apply), nil
}

// RemovalGuard returns the guard's holds and history, as the API serves
// them.
func (u *Updater) RemovalGuard() status.RemovalGuard {
	u.lock()
	defer u.mu.Unlock()
	g := &u.guard
	p := g.policy.Normal()
	out := status.RemovalGuard{Holds: []status.RemovalHold{}, WindowSeconds: p.Window.Seconds(), MinVMs: p.MinVMs, Percent: p.Percent,
		ConfirmSeconds: p.Confirm.Seconds()}
	for _, c := range guard.Causes {
		s := g.state.Causes[c]
		if s.Phase == guard.Clear {
			continue
		}
		h := status.RemovalHold{Cause: string(c), Phase: string(s.Phase), Since: s.Since, VMs: len(s.Held), Peak: s.Peak, Of: s.Of,
			ConfirmAt: p.ConfirmAt(s), What: c.Text(), Upstream: c.Upstream()}
		if t, ok := g.fresh[c]; ok {
			h.UpstreamAnswered = t
		}
		out.Holds = append(out.Holds, h)
	}
	for _, e := range g.state.History {
		out.History = append(out.History, status.RemovalEvent{Time: e.Time, Cause: string(e.Cause), Action: string(e.Action), VMs: e.VMs, Of: e.Of, Left: e.Left})
	}
	return out
}

// HeldRemovals returns how many VMs' removals each cause holds, for the
// metrics.
func (u *Updater) HeldRemovals() map[string]int {
	u.lock()
	defer u.mu.Unlock()
	out := map[string]int{}
	for _, c := range slices.Sorted(maps.Keys(u.guard.state.Causes)) {
		s := u.guard.state.Causes[c]
		n := 0
		if s.Phase == guard.Holding || s.Phase == guard.Confirming {
			n = len(s.Held)
		}
		out[string(c)] = n
	}
	return out
}
