package feeds_test

import (
	"slices"
	"testing"

	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/guard"
)

// A VM whose removal the guard holds is still served as a member of its
// services, and the self-removal hysteresis counts it so: the members
// still up in DNS are not forgotten when another member takes itself out.
//
// Three VMs of one owner on three compute nodes make the service
// "guarded". Every CN but the third's goes down (held: the first two keep
// their service names); then the third marks itself down. Three members
// are served, so it may leave at once (a third of three); had the
// hysteresis forgotten the two held ones, it would be the last member and
// wait ten minutes.
func TestGuardHeldVMsStayMembers(t *testing.T) {
	w := newGZWorld(t)
	a, b, c := w.vmsOnThreeCNs()
	owner := a.OwnerUUID
	for _, vm := range []dc.VM{a, b, c} {
		if err := w.sim.SetTag(vm.UUID, "triton.cns.services", "guarded"); err != nil {
			t.Fatal(err)
		}
	}
	w.waitFor("the service's three members", func() bool { return w.idle() && len(w.addrs("guarded.svc."+owner)) == 3 })
	w.allCNs(cnDown, c.ServerUUID)
	w.waitFor("the removals to be held", func() bool { h, ok := w.hold(guard.CNDown); return ok && h.VMs > 400 && w.idle() })
	if got := w.addrs("guarded.svc." + owner); len(got) != 3 {
		t.Fatalf("held, the service lists %q, want its three members", got)
	}
	svc, err := w.u.Service(owner, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	if svc.Listed != 3 || svc.N != 3 {
		t.Errorf("held, the hysteresis counts %d listed, n=%d; want the 3 members DNS serves", svc.Listed, svc.N)
	}

	if err := w.sim.SetMetadata(c.UUID, "triton.cns.status", "down"); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the third member's status", func() bool {
		s, err := w.u.Service(owner, "guarded")
		return err == nil && slices.ContainsFunc(s.Members, func(m status.ServiceMember) bool { return m.VM == c.UUID && m.Status != "up" }) && w.idle()
	})
	want := []string{ipOf(a), ipOf(b)}
	slices.Sort(want)
	if got := w.addrs("guarded.svc." + owner); !slices.Equal(got, want) {
		svc, _ := w.u.Service(owner, "guarded")
		t.Errorf("after the third member went down the service lists %q, want %q (the held members' only): %+v", got, want, svc)
	}

	// Accepted, the held removals go through, and the hysteresis hears
	// of them: the two leave the service as hard removals.
	if _, err := w.u.AcceptRemovals(string(guard.CNDown)); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the held removals to go through", func() bool { _, ok := w.hold(guard.CNDown); return !ok && w.idle() })
	if got := w.addrs("guarded.svc." + owner); len(got) != 0 {
		t.Errorf("accepted, the service still lists %q", got)
	}
	svc, err = w.u.Service(owner, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range svc.Members {
		if m.VM != c.UUID {
			t.Errorf("accepted, %s is still a member: %+v", m.VM, m)
		}
	}
}

// vmsOnThreeCNs returns three running VMs of one owner with names, on
// three compute nodes.
func (w *gzWorld) vmsOnThreeCNs() (a, b, c dc.VM) {
	w.t.Helper()
	byOwner := map[string][]dc.VM{}
	for _, vm := range w.sim.Inventory().VMs {
		byOwner[vm.OwnerUUID] = append(byOwner[vm.OwnerUUID], vm)
	}
	for _, vms := range byOwner {
		var picked []dc.VM
		for _, vm := range vms {
			if !slices.ContainsFunc(picked, func(p dc.VM) bool { return p.ServerUUID == vm.ServerUUID }) {
				picked = append(picked, vm)
			}
			if len(picked) == 3 {
				return picked[0], picked[1], picked[2]
			}
		}
	}
	w.t.Fatal("no owner with VMs on three compute nodes")
	return
}

// ipOf is a VM's first address.
func ipOf(vm dc.VM) string { return vm.NICs[0].IP }
