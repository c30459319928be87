package busydc

import (
	"testing"

	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// TestChurn makes changes through a simulator: the mix comes out near its
// weights, no change fails, and what the churn believes of each VM is
// what the simulator holds.
func TestChurn(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 500, Seed: 1})
	sim, err := sdcsim.New(*inv, sdcsim.Options{PlainLDAPInConfig: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	c := newChurn(sim, inv, zone, 7)
	kinds := map[string]int{}
	probes := 0
	const n = 4000
	for range n {
		ch, err := c.next(true)
		if err != nil {
			t.Fatalf("%s: %v", ch.kind, err)
		}
		kinds[ch.kind]++
		if ch.probe != nil {
			probes++
			if ch.probe.name == "" || ch.probe.want == nil {
				t.Fatalf("%s: empty probe", ch.kind)
			}
			c.done(ch.probe)
		}
	}
	for _, m := range churnMix {
		if got, want := kinds[m.kind], n*m.weight/100; got < want*7/10 || got > want*13/10 {
			t.Errorf("%s: %d changes of %d, want ~%d", m.kind, got, n, want)
		}
	}
	if probes < n/3 {
		t.Errorf("only %d of %d changes had a visible effect", probes, n)
	}
	for _, list := range [][]string{c.running, c.stopped} {
		for _, u := range list {
			vm, ok := sim.VM(u)
			v := c.vms[u]
			if !ok || vm.NICs[0].IP != v.ip() || (vm.State == "running") != v.running || vm.AliasString() != v.vm.AliasString() {
				t.Fatalf("VM %s: the simulator holds %+v, the churn believes %+v", u, vm, v.vm)
			}
		}
	}
	if len(c.running)+len(c.stopped) != len(c.vms) {
		t.Errorf("%d running + %d stopped, %d VMs known", len(c.running), len(c.stopped), len(c.vms))
	}
}
