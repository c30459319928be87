package feeds

import (
	"slices"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/guard"
	"github.com/tritondatacenter/cns/feeds/records"
)

// A held VM's instance names and PTRs do not block a VM that is not
// held: a new VM on its address, or with its alias in its account, gets
// them. Before a batch is stored, the instance names and PTR names its
// VMs put records at are looked up in the store (nameClaims); where a
// held VM and one that is not meet, the held one is let go alone
// (guard.Policy.Yield), in that batch, so the name changes hands in one
// commit (yieldNames). That is a held VM the store lists at a name a VM
// of the batch takes, or a held VM of the batch computed as held (a
// recalled one, its names coming back) at a name another VM took
// meanwhile.

// nameClaim is an instance name or a PTR (name) that a VM of a batch
// puts records at (vm), where the store holds another VM's records
// (other).
type nameClaim struct {
	vm, other string
	name      db.Name
}

// nameClaims returns the instance names and PTRs b's VMs put records at
// that other VMs' stored records are at too, when a hold may keep a VM
// at such a name: the guard holds removals that would take them, or b
// may begin to. u.mu is not held.
func (u *Updater) nameClaims(b *batch) []nameClaim {
	u.mu.Lock()
	look := u.guard.state.HoldsNames()
	u.mu.Unlock()
	for i := 0; !look && i < len(b.candidates); i++ {
		look = !b.candidates[i].removal.Cause.KeepsInstanceNames()
	}
	if !look {
		return nil
	}
	var names []db.Name
	var by []string // the VM of b at names[i]
	var ptr []bool  // names[i] is an address's PTR name
	for i := range b.cs.VMs {
		vc := &b.cs.VMs[i]
		first := len(names)
		vc.EachRecord(func(zone, owner string, rrtype uint16) {
			n := db.Name{Zone: zone, Owner: owner}
			isPTR := rrtype == dns.TypePTR
			if (isPTR || records.InstanceName(n.Owner, n.Zone)) && !slices.Contains(names[first:], n) {
				names, by, ptr = append(names, n), append(by, vc.UUID), append(ptr, isPTR)
			}
		})
	}
	at := make([][]string, len(names))
	if err := u.store.VMsAt(names, func(i int, vm string) { at[i] = append(at[i], vm) }); err != nil {
		u.log.Warn("reading who holds the names a batch takes failed; held VMs keep theirs", "err", err)
		return nil
	}
	var out []nameClaim
	for i, vms := range at {
		// An instance name the VM already shares (two VMs of an account
		// with one alias both answer it) is no new need: the other VM
		// keeps it, held or not. An address's PTR names one VM only.
		if !ptr[i] && slices.Contains(vms, by[i]) {
			continue
		}
		for _, vm := range vms {
			if vm != by[i] {
				out = append(out, nameClaim{vm: by[i], other: vm, name: names[i]})
			}
		}
	}
	return out
}

// yieldNames lets go, each alone, the held VMs of claims whose other VM
// is not held: the guard applies their removal (guard.Policy.Yield), and
// their changes join b, so that the names change hands in one commit.
// hold are the VMs b's step held; held are the changes the guard took
// out of b. u.mu is held.
func (u *Updater) yieldNames(b *batch, claims []nameClaim, hold map[string]bool, held map[string]db.VMChange) {
	isHeld := func(vm string) bool {
		_, ok := u.guard.state.Held(vm)
		return ok || hold[vm]
	}
	neededBy := map[string]nameClaim{} // held VM → the claim it yields to
	var vms []string
	for _, c := range claims {
		switch {
		case isHeld(c.other) && !isHeld(c.vm): // b's VM takes a held VM's name
		case isHeld(c.vm) && !hold[c.vm] && !isHeld(c.other): // a held VM of b (as held) meets a VM that is not
			c.vm, c.other = c.other, c.vm
		default:
			continue
		}
		if _, seen := neededBy[c.other]; !seen {
			neededBy[c.other] = c
			vms = append(vms, c.other)
		}
	}
	if len(vms) == 0 {
		return
	}
	causes := map[string]guard.Cause{}
	for _, vm := range vms {
		causes[vm], _ = u.guard.state.Held(vm)
	}
	v := u.guard.policy.Yield(u.guard.state, vms, u.now())
	for _, vm := range v.Apply {
		c := neededBy[vm]
		u.log.Warn("held removal applied: another VM needs its name", "vm", vm, "cause", string(causes[vm]), "name", c.name.Owner, "needed_by", c.vm)
		delete(hold, vm)
		u.yieldTo(b, vm, held)
	}
	v.Apply = nil // (in b)
	u.guardVerdict(v)
}

// yieldTo puts the change of vm, whose held removal the guard let go,
// in b: the one the guard took out of b (held), or computed now (in
// place of its change as held, if b has one). A VM computed now is
// marked as b takes it, so a commit that fails leaves it to compute
// again. u.mu is held.
func (u *Updater) yieldTo(b *batch, vm string, held map[string]db.VMChange) {
	if vc, ok := held[vm]; ok {
		b.cs.VMs = append(b.cs.VMs, vc)
		b.held = slices.DeleteFunc(b.held, func(id string) bool { return id == vm })
		return // (its services hear of it with b's other removals)
	}
	b.cs.VMs = slices.DeleteFunc(b.cs.VMs, func(vc db.VMChange) bool { return vc.UUID == vm })
	u.mark(vm)
	vc, ok, cand := u.change(vm)
	if cand != nil && cand.report != nil {
		u.reportRemoval(vm, cand.report)
	}
	if ok {
		b.cs.VMs = append(b.cs.VMs, vc)
		b.gens[vm] = u.sched.marked(vm)
	}
}
