package feeds_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/guard"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// A held VM's instance names and PTRs go to a VM that needs them: the
// guard lets that one held VM's removal go through, in the commit that
// gives the new VM its names, and the rest of the hold stands.

// shortListing purges n VMs that have an alias from VMAPI, calls also
// with them, and relists: the listing that misses them is held (cause
// unlisted). It returns them.
func (w *gzWorld) shortListing(n int, also func(gone []dc.VM)) []dc.VM {
	w.t.Helper()
	gone := w.purgeAliased(n)
	if also != nil {
		also(gone)
	}
	w.relist()
	if h, ok := w.hold(guard.Unlisted); !ok || h.Peak != n {
		w.t.Fatalf("after the short listing the hold is %+v (%v), want %d VMs held", h, ok, n)
	}
	return gone
}

// purgeAliased purges from VMAPI the first n VMs it lists that have an
// alias, and returns them.
func (w *gzWorld) purgeAliased(n int) []dc.VM {
	w.t.Helper()
	var gone []dc.VM
	for _, vm := range w.sim.Inventory().VMs {
		if len(gone) == n {
			break
		}
		if vm.Alias != nil {
			if err := w.sim.PurgeVM(vm.UUID); err != nil {
				w.t.Fatal(err)
			}
			gone = append(gone, vm)
		}
	}
	return gone
}

// newVM provisions a VM of owner on server with alias and nics, and
// waits for it to have names.
func (w *gzWorld) newVM(uuid, owner, server, alias string, nics []dc.NIC) dc.VM {
	w.t.Helper()
	vm := w.createVM(uuid, owner, server, alias, nics)
	w.waitFor("the new VM's names", func() bool { return w.idle() && w.instanceNames(uuid) > 0 })
	return vm
}

// createVM provisions a VM of owner on server with alias and nics.
func (w *gzWorld) createVM(uuid, owner, server, alias string, nics []dc.NIC) dc.VM {
	w.t.Helper()
	vm := dc.VM{UUID: uuid, OwnerUUID: owner, ServerUUID: server, Alias: &alias, State: "running", Brand: "joyent",
		NICs: slices.Clone(nics), Tags: map[string]any{}, CustomerMetadata: map[string]any{}}
	for i := range vm.NICs {
		vm.NICs[i].MAC = "90:b8:d0:ff:ff:0" + string(rune('0'+i))
	}
	if err := w.sim.CreateVM(vm); err != nil {
		w.t.Fatal(err)
	}
	return vm
}

// ptr returns the PTR targets of ip.
func (w *gzWorld) ptr(ip string) []string {
	w.t.Helper()
	rev, err := dns.ReverseAddr(ip)
	if err != nil {
		w.t.Fatal(err)
	}
	zone := strings.TrimSuffix(rev[strings.Index(rev, ".")+1:], ".")
	var out []string
	err = w.store.ScanZone(zone, func(owner []byte, rrs db.RRs) error {
		if db.WireToString(owner) != rev {
			return nil
		}
		list, err := rrs.ToRR(rev)
		for _, rr := range list {
			if p, ok := rr.(*dns.PTR); ok {
				out = append(out, p.Ptr)
			}
		}
		return err
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// addrs returns the addresses at name (in the zone, without it), sorted:
// an instance name (<alias>.inst.<owner>) or a service's.
func (w *gzWorld) addrs(name string) []string {
	prefix := name + "." + gzZone + ".\t"
	var out []string
	for _, r := range w.names() {
		if f := strings.Split(r, "\t"); strings.HasPrefix(r, prefix) && len(f) == 5 && f[3] == "A" {
			out = append(out, f[4])
		}
	}
	slices.Sort(out)
	return out
}

const (
	newUUID = "0e1d0000-0000-4000-8000-000000000043"
	// longAlias makes the new VM's PTR target longer than the held VM's:
	// competing, the held VM's would be served (the shortest wins).
	longAlias = "a-new-vm-with-an-alias-longer-than-any-the-simulator-gives"
)

// A VM missing from a short listing is held; a new VM takes its address:
// the address's PTR names the new VM, the held VM's removal goes through
// (that VM alone: it is gone, its address reused), and the rest stay
// held with their names.
func TestGuardHeldPTRGoesToNewVM(t *testing.T) {
	w := newGZWorld(t)
	gone := w.shortListing(400, nil)
	x, other := gone[0], gone[1]
	ip := ipOf(x)
	if got := w.ptr(ip); len(got) != 1 || !strings.HasPrefix(got[0], *x.Alias+".inst.") {
		t.Fatalf("held, %s's PTR is %q, want the held VM's", ip, got)
	}
	y := w.newVM(newUUID, x.OwnerUUID, x.ServerUUID, longAlias, x.NICs)
	if got, want := w.ptr(ip), longAlias+".inst."+y.OwnerUUID+"."+gzZone+"."; !slices.Equal(got, []string{want}) {
		t.Errorf("%s's PTR is %q, want the new VM's %s", ip, got, want)
	}
	if n := w.instanceNames(x.UUID); n != 0 {
		t.Errorf("the held VM whose address was taken keeps %d records", n)
	}
	if n := w.instanceNames(other.UUID); n == 0 {
		t.Errorf("another held VM lost its names")
	}
	if h, _ := w.hold(guard.Unlisted); h.VMs != 399 || h.Phase != string(guard.Holding) {
		t.Errorf("the hold is %+v, want 399 VMs holding", h)
	}
	if got := w.events(); !slices.Equal(got, []string{"unlisted held", "unlisted yielded"}) {
		t.Errorf("events %q", got)
	}
	if !strings.Contains(w.logs.String(), `"msg":"held removal applied: another VM needs its name","vm":"`+x.UUID+`","cause":"unlisted"`) ||
		!strings.Contains(w.logs.String(), `"needed_by":"`+newUUID+`"`) {
		t.Errorf("no log line for the held VM let go:\n%s", w.logs.String())
	}
}

// The listing that misses a VM has a new one on its address (the
// changefeed's event for it lost): in the batch that holds the rest,
// the missing VM goes and the new one takes the PTR.
func TestGuardHeldPTRGoesToNewVMOfTheSameListing(t *testing.T) {
	w := newGZWorld(t)
	var x dc.VM
	gone := w.shortListing(400, func(gone []dc.VM) {
		x = gone[0]
		w.sim.SetFeedFaults(sdcsim.FeedFaults{DropItems: 1})
		w.createVM(newUUID, x.OwnerUUID, x.ServerUUID, longAlias, x.NICs)
	})
	if got, want := w.ptr(ipOf(x)), longAlias+".inst."+x.OwnerUUID+"."+gzZone+"."; !slices.Equal(got, []string{want}) {
		t.Errorf("%s's PTR is %q, want the new VM's %s", ipOf(x), got, want)
	}
	if n := w.instanceNames(x.UUID); n != 0 {
		t.Errorf("the held VM whose address was taken keeps %d records", n)
	}
	if n := w.instanceNames(gone[1].UUID); n == 0 {
		t.Errorf("another held VM lost its names")
	}
	if got := w.events(); !slices.Equal(got, []string{"unlisted held", "unlisted yielded"}) {
		t.Errorf("events %q", got)
	}
}

// A new VM of the held VM's owner takes its alias: the alias names the
// new VM only.
func TestGuardHeldAliasGoesToNewVM(t *testing.T) {
	w := newGZWorld(t)
	gone := w.shortListing(400, nil)
	x := gone[0]
	nic := x.NICs[0]
	nic.IP, nic.IPs, nic.Primary = "10.200.0.1", []string{"10.200.0.1/8"}, true
	if got := w.addrs(*x.Alias + ".inst." + x.OwnerUUID); !slices.Equal(got, []string{ipOf(x)}) {
		t.Fatalf("held, the alias names %q, want the held VM's %s", got, ipOf(x))
	}
	w.newVM(newUUID, x.OwnerUUID, x.ServerUUID, *x.Alias, []dc.NIC{nic})
	if got := w.addrs(*x.Alias + ".inst." + x.OwnerUUID); !slices.Equal(got, []string{"10.200.0.1"}) {
		t.Errorf("the alias names %q, want the new VM's 10.200.0.1 only", got)
	}
	if n := w.instanceNames(x.UUID); n != 0 {
		t.Errorf("the held VM whose alias was taken keeps %d records", n)
	}
	if h, _ := w.hold(guard.Unlisted); h.VMs != 399 {
		t.Errorf("the hold is %+v, want 399 VMs", h)
	}
}

// A VM on a down compute node keeps its instance names and PTRs whatever
// the guard does (RFD 1: it only leaves its services), so a new VM on its
// address frees nothing by letting it go: it stays held, in its services.
// Which VM's PTR the address serves is the store's rule, as without the
// guard.
func TestGuardHeldOnDownCNKeepsItsServices(t *testing.T) {
	w := newGZWorld(t)
	var x dc.VM
	for _, vm := range w.sim.Inventory().VMs {
		if vm.Tags["triton.cns.services"] != nil {
			x = vm
			break
		}
	}
	w.allCNs(cnDown)
	w.waitFor("the removals to be held", func() bool { _, ok := w.hold(guard.CNDown); return ok && w.idle() })
	held, _ := w.hold(guard.CNDown)
	svcs := w.services()
	w.newVM(newUUID, x.OwnerUUID, x.ServerUUID, longAlias, x.NICs)
	if h, _ := w.hold(guard.CNDown); h.VMs != held.VMs {
		t.Errorf("the hold holds %d VMs, was %d", h.VMs, held.VMs)
	}
	if got := w.services(); got != svcs {
		t.Errorf("%d service records, was %d", got, svcs)
	}
	if got := w.events(); !slices.Equal(got, []string{"cn_down held"}) {
		t.Errorf("events %q", got)
	}
}

// Two VMs of an account share an alias, and one of them is held. The
// other one changes (it joins a service): the alias was its already, so
// it needs nothing of the held VM's, which keeps its names and its hold.
func TestGuardHeldAliasSharedStaysHeld(t *testing.T) {
	w := newGZWorld(t)
	var x dc.VM
	for _, vm := range w.sim.Inventory().VMs {
		if vm.Alias != nil {
			x = vm
			break
		}
	}
	nic := x.NICs[0]
	nic.IP, nic.IPs, nic.Primary = "10.200.0.1", []string{"10.200.0.1/8"}, true
	const sibling = "ffff0000-0000-4000-8000-000000000043" // (listed last: the short listing keeps it)
	w.newVM(sibling, x.OwnerUUID, x.ServerUUID, *x.Alias, []dc.NIC{nic})
	shared := []string{ipOf(x), "10.200.0.1"}
	slices.Sort(shared)
	if got := w.addrs(*x.Alias + ".inst." + x.OwnerUUID); !slices.Equal(got, shared) {
		t.Fatalf("the alias names %q, want both VMs' %q", got, shared)
	}
	if gone := w.shortListing(400, nil); gone[0].UUID != x.UUID {
		t.Fatalf("the short listing misses %s first, want %s", gone[0].UUID, x.UUID)
	}
	err := w.sim.ModifyVM(sibling, func(vm *dc.VM) { vm.Tags["triton.cns.services"] = "shared" })
	if err != nil {
		t.Fatal(err)
	}
	w.waitFor("the other VM in its service", func() bool {
		return w.idle() && slices.ContainsFunc(w.names(), func(r string) bool { return strings.HasPrefix(r, "shared.svc.") })
	})
	if got := w.addrs(*x.Alias + ".inst." + x.OwnerUUID); !slices.Equal(got, shared) {
		t.Errorf("the alias names %q, want both VMs' %q still", got, shared)
	}
	if n := w.instanceNames(x.UUID); n == 0 {
		t.Errorf("the held VM lost its names")
	}
	if h, _ := w.hold(guard.Unlisted); h.VMs != 400 {
		t.Errorf("the hold is %+v, want 400 VMs", h)
	}
	if got := w.events(); !slices.Equal(got, []string{"unlisted held"}) {
		t.Errorf("events %q", got)
	}
}
