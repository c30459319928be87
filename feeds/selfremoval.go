package feeds

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/hysteresis"
	"github.com/tritondatacenter/cns/feeds/records"
)

// The updater's side of the self-removal hysteresis (package hysteresis
// holds the rules). Every VM the updater computes is reported to the
// services it belongs to: listable, down by its own triton.cns.status, or
// out for a hard reason. The services that do not let a down VM go yet are
// passed to records.Compute as HeldServices, so the VM stays in their
// names with reason "held". When a held member's turn comes without any
// feed event, the Run loop's timer (untilNextRelease) wakes Tick, which
// lets it go and marks it for the next commit.
//
// The state of every changed service is written in the change set that
// carries the records its decisions produced (db.ChangeSet.Hysteresis),
// so after a crash records and hysteresis state agree, and a restart
// neither forgets pending removals nor resets their clocks.

// serviceHealth is the hysteresis state of every service with members.
type serviceHealth struct {
	policy   hysteresis.Policy
	services map[string]*hysteresis.Service // by hysteresis.Key
	byVM     memberships                    // VM UUID → the services it is a member of
	dirty    map[string]uint64              // keys to write, by the generation that changed them
	gen      uint64
	// pending holds the keys of the services with a check to come
	// (NextCheck set): the few the timer looks at, where scanning every
	// service on each of the updater's loops cost 1.7 % of cns's CPU at
	// 20k VMs under a busy data center's churn (bench/busydc.sh), with
	// the updater's lock held.
	pending map[string]struct{}
}

// loadServiceHealth reads the stored state. A record that does not
// decode is dropped with a warning: its members are re-learnt from the
// feed, only their pending clocks are lost.
func loadServiceHealth(store *db.DB, p hysteresis.Policy, now time.Time, log *slog.Logger) (*serviceHealth, error) {
	stored, err := store.Hysteresis()
	if err != nil {
		return nil, err
	}
	h := &serviceHealth{policy: p, services: map[string]*hysteresis.Service{}, dirty: map[string]uint64{}, pending: map[string]struct{}{}}
	for key, b := range stored {
		s, err := hysteresis.Decode(b)
		if err != nil || s.Key() != key {
			log.Warn("hysteresis state unreadable; its service starts afresh", "service", key, "err", err)
			h.touch(key)
			continue
		}
		// The policy may have changed since the state was written: look
		// at the pending members again at the first chance.
		if !s.NextCheck.IsZero() && s.NextCheck.After(now) {
			s.NextCheck = now
		}
		h.services[key] = s
		h.scheduled(key, s)
		for vm := range s.Up {
			h.join(vm, s)
		}
		for vm := range s.Down {
			h.join(vm, s)
		}
	}
	return h, nil
}

func (h *serviceHealth) join(vm string, s *hysteresis.Service)  { h.byVM.join(vm, s) }
func (h *serviceHealth) leave(vm string, s *hysteresis.Service) { h.byVM.leave(vm, s) }

// memberships is which services each VM is a member of. Most VMs are in
// one service: that one is held as a pointer, and only VMs in several
// have a slice (a slice each cost ~30 MB more at a million members).
type memberships struct {
	one  map[string]*hysteresis.Service
	more map[string][]*hysteresis.Service
}

// of returns a copy of vm's services: callers change them as they go.
func (m *memberships) of(vm string) []*hysteresis.Service {
	if s := m.one[vm]; s != nil {
		return []*hysteresis.Service{s}
	}
	return slices.Clone(m.more[vm])
}

func (m *memberships) has(vm string) bool { return m.one[vm] != nil || len(m.more[vm]) > 0 }

func (m *memberships) join(vm string, s *hysteresis.Service) {
	if m.one == nil {
		m.one, m.more = map[string]*hysteresis.Service{}, map[string][]*hysteresis.Service{}
	}
	switch cur, more := m.one[vm], m.more[vm]; {
	case cur == s || slices.Contains(more, s):
	case cur == nil && more == nil:
		m.one[vm] = s
	case cur != nil:
		delete(m.one, vm)
		m.more[vm] = []*hysteresis.Service{cur, s}
	default:
		m.more[vm] = append(more, s)
	}
}

func (m *memberships) leave(vm string, s *hysteresis.Service) {
	if m.one[vm] == s {
		delete(m.one, vm)
		return
	}
	switch more := slices.DeleteFunc(m.more[vm], func(x *hysteresis.Service) bool { return x == s }); len(more) {
	case 0:
		delete(m.more, vm)
	case 1:
		delete(m.more, vm)
		m.one[vm] = more[0]
	default:
		m.more[vm] = more
	}
}

// scheduled keeps key in pending while s has a check to come; s is nil
// for a service that is gone.
func (h *serviceHealth) scheduled(key string, s *hysteresis.Service) {
	if s == nil || s.NextCheck.IsZero() {
		delete(h.pending, key)
		return
	}
	h.pending[key] = struct{}{}
}

func (h *serviceHealth) touch(key string) {
	h.gen++
	h.dirty[key] = h.gen
}

// writes returns the encoded state of every changed service (nil: the
// service has no members left) for the next change set, and the
// generations to pass to written once it is committed; not those a
// commit in flight (inFlight: its generations) already stores. With
// more (chunks of a backlog follow this one) it leaves out, still dirty,
// the services a restart's listing would rebuild (rebuildable): the
// members of a big service come in every chunk of a first load, and
// encoding all of them for every chunk cost more than the records of a
// million VMs' chunks (6 of 44 CPU s of their computation).
func (h *serviceHealth) writes(inFlight map[string]uint64, more bool) (map[string][]byte, map[string]uint64) {
	if len(h.dirty) == 0 {
		return nil, nil
	}
	out := make(map[string][]byte, len(h.dirty))
	gens := make(map[string]uint64, len(h.dirty))
	for key, g := range h.dirty {
		if f, ok := inFlight[key]; ok && f == g {
			continue // a commit in flight stores this very state
		}
		s := h.services[key]
		if more && rebuildable(s) {
			continue
		}
		gens[key] = g
		var b []byte
		if s != nil {
			b = s.Encode()
		}
		out[key] = b
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, gens
}

// rebuildable reports whether s is state that a restart rebuilds as it
// is, whatever older state of it the store holds: only members listed
// with their status up, and nothing remembered (no history, no
// departures, no member down or pending, no clock). A restart reads the
// stored state and recomputes every VM of the listing, which reports each
// member up again; everything else in a service's state says when
// something happened, and is written in the change set of the records it
// decided.
func rebuildable(s *hysteresis.Service) bool {
	return s != nil && len(s.Down) == 0 && len(s.Departures) == 0 && len(s.History) == 0 && s.NextCheck.IsZero()
}

// written forgets the changes a commit stored, unless they changed again
// since.
func (h *serviceHealth) written(gens map[string]uint64) {
	for key, g := range gens {
		if h.dirty[key] == g {
			delete(h.dirty, key)
		}
	}
}

// computeListing computes a VM's records once: records decides which
// services the VM is a candidate of (d), the hysteresis decides which of
// them hold it although it is down, and records assembles the records
// with those (Assemble). A removal the guard on mass removals may hold
// (cand) is not reported yet: the hysteresis hears of it on the guard's
// turn, if it goes through (candidate.report), and otherwise goes on
// counting the VM as the member it is still served as.
func (u *Updater) computeListing(d *records.Decision, in records.Input, cand *candidate) records.Result {
	uuid := in.VM.UUID
	if len(d.Services) == 0 && !u.health.byVM.has(uuid) {
		return d.Assemble(u.world(), nil) // in no service, before or now
	}
	names := serviceNames(d.Services)
	is, reason := hysteresis.Removed, hardReason(in, d.Reasons)
	switch {
	case d.ListServices:
		is = hysteresis.Listable
	case d.Holdable && len(names) > 0:
		// Down by its own status, and no hard reason applies as well
		// (stopped, CN down, ...): its services may hold it.
		is = hysteresis.Down
	}
	owner := strings.ToLower(in.Owner.UUID)
	if cand != nil && is == hysteresis.Removed {
		cand.report = &memberReport{owner: owner, names: names, reason: reason}
		return d.Assemble(u.world(), nil) // (a hard removal: no service holds it)
	}
	held := u.reportMember(uuid, owner, names, is, reason)
	return d.Assemble(u.world(), held)
}

// memberReport is a hard removal from its services that the hysteresis
// hears of once the guard on mass removals let it go through: of the
// services of owner named names (and those the VM was in before), or,
// gone, of every service the VM was in.
type memberReport struct {
	owner  string
	names  []string
	reason string
	gone   bool
}

// reportRemoval tells the services of VM uuid of its hard removal r.
func (u *Updater) reportRemoval(uuid string, r *memberReport) {
	if r.gone {
		u.leaveServices(uuid)
		return
	}
	u.reportMember(uuid, r.owner, r.names, hysteresis.Removed, r.reason)
}

// serviceNames returns the distinct service names of svcs.
func serviceNames(svcs []records.Service) []string {
	var names []string
	for _, s := range svcs {
		if !slices.Contains(names, s.Name) {
			names = append(names, s.Name)
		}
	}
	return names
}

// hardReason says why a VM that is not listable in its services is out
// (reasons: its decision's), in the reference's reason words.
func hardReason(in records.Input, reasons []records.Reason) string {
	var why []string
	for _, r := range reasons {
		if r != records.ReasonInstEnFlag && r != records.ReasonInvalidTag && r != records.ReasonPTR {
			why = append(why, string(r))
		}
	}
	// The reference records only the first service-level reason; a VM
	// both down by status and stopped must still say it is stopped.
	if in.CNDown && !slices.Contains(why, string(records.ReasonCNDown)) {
		why = append(why, string(records.ReasonCNDown))
	}
	if in.VM.State != "running" && !slices.Contains(why, string(records.ReasonVMDown)) {
		why = append(why, string(records.ReasonVMDown))
	}
	if len(why) == 0 {
		return "not listable in its services"
	}
	return strings.Join(why, ", ")
}

// reportMember tells the services of owner named names (and those the
// VM was a member of before) what was observed of VM uuid, and returns
// the names of the services that hold it.
func (u *Updater) reportMember(uuid, owner string, names []string, is hysteresis.Observed, reason string) []string {
	now := u.now()
	current := map[string]bool{}
	for _, name := range names {
		key := hysteresis.Key(owner, name)
		current[key] = true
		u.applyHysteresis(key, owner, name, hysteresis.Change{VM: uuid, Is: is, Reason: reason}, uuid, now)
	}
	for _, s := range u.health.byVM.of(uuid) {
		if key := s.Key(); !current[key] {
			u.applyHysteresis(key, "", "", hysteresis.Change{VM: uuid, Is: hysteresis.Removed, Reason: "service tag removed"}, uuid, now)
		}
	}
	var held []string
	for _, name := range names {
		if s := u.health.services[hysteresis.Key(owner, name)]; s != nil && s.Held(uuid) {
			held = append(held, name)
		}
	}
	return held
}

// leaveServices drops VM uuid, gone from the data center, from every
// service it was in.
func (u *Updater) leaveServices(uuid string) {
	now := u.now()
	for _, s := range u.health.byVM.of(uuid) {
		u.applyHysteresis(s.Key(), "", "", hysteresis.Change{VM: uuid, Is: hysteresis.Removed, Reason: "destroyed"}, uuid, now)
	}
}

// applyHysteresis applies changes (none: the timer's turn) to the service
// key, creating it (owner, name) if needed, and acts on the decisions:
// logs them, and marks for recomputation the members it let go other than
// current, whose records are being computed by the caller.
func (u *Updater) applyHysteresis(key, owner, name string, c hysteresis.Change, current string, now time.Time) {
	h := u.health
	s := h.services[key]
	if s == nil {
		if c.Is == hysteresis.Removed || c.VM == "" {
			return
		}
		s = hysteresis.NewService(owner, name)
		h.services[key] = s
	}
	var changes []hysteresis.Change
	if c.VM != "" {
		changes = []hysteresis.Change{c}
	}
	decisions, changed := h.policy.Apply(s, changes, now)
	if !changed {
		return
	}
	h.touch(key)
	if c.VM != "" {
		if s.Has(c.VM) {
			h.join(c.VM, s)
		} else {
			h.leave(c.VM, s)
		}
	}
	if s.Empty() {
		delete(h.services, key)
		s = nil
	}
	h.scheduled(key, s)
	for _, d := range decisions {
		u.log.Info("hysteresis", "service", key, "vm", d.VM, "action", string(d.Action), "reason", d.Reason)
		if d.Action == hysteresis.ActionReleased && d.VM != current && u.vms[d.VM] != nil {
			u.mark(d.VM)
			u.causes["self-removal hysteresis"]++
		}
	}
}

// releaseDue gives the services whose next check has come their turn.
// It waits for the first full listing after a start: a member that came
// back up while cns was not looking must not be let go.
func (u *Updater) releaseDue() {
	if !u.haveFull {
		return
	}
	now := u.now()
	for _, key := range slices.Sorted(maps.Keys(u.health.pending)) {
		if !now.Before(u.health.services[key].NextCheck) {
			u.applyHysteresis(key, "", "", hysteresis.Change{}, "", now)
		}
	}
}

// untilNextRelease is how long until the next service's check, for the
// Run loop's timer; ok is false when there is nothing to wait for.
func (u *Updater) untilNextRelease() (d time.Duration, ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.haveFull {
		return 0, false
	}
	var next time.Time
	for key := range u.health.pending {
		if s := u.health.services[key]; next.IsZero() || s.NextCheck.Before(next) {
			next = s.NextCheck
		}
	}
	if next.IsZero() {
		return 0, false
	}
	return max(next.Sub(u.now()), 0), true
}

// Services returns the self-removal hysteresis state of every service
// with members, by owner and name, for the admin API and the TUI.
func (u *Updater) Services() []status.Service {
	u.lock()
	defer u.mu.Unlock()
	now := u.now()
	out := make([]status.Service, 0, len(u.health.services))
	for _, key := range slices.Sorted(maps.Keys(u.health.services)) {
		out = append(out, u.health.policy.View(u.health.services[key], now))
	}
	return out
}

// Service returns the hysteresis state of owner's (UUID) service name.
func (u *Updater) Service(owner, name string) (status.Service, error) {
	u.lock()
	defer u.mu.Unlock()
	s := u.health.services[hysteresis.Key(strings.ToLower(owner), strings.ToLower(name))]
	if s == nil {
		return status.Service{}, fmt.Errorf("service %s of %s: %w", name, owner, ErrUnknownService)
	}
	return u.health.policy.View(s, u.now()), nil
}

// ErrUnknownService is returned by Service for a service without members.
var ErrUnknownService = errors.New("service not found")
