package feeds

import (
	"cmp"
	"slices"
	"testing"

	"github.com/tritondatacenter/cns/feeds/hysteresis"
)

func TestMemberships(t *testing.T) {
	a, b, c := hysteresis.NewService("o", "a"), hysteresis.NewService("o", "b"), hysteresis.NewService("o", "c")
	var m memberships
	want := func(step, vm string, svcs ...*hysteresis.Service) {
		t.Helper()
		got := m.of(vm)
		slices.SortFunc(got, func(x, y *hysteresis.Service) int { return cmp.Compare(x.Name, y.Name) })
		if !slices.Equal(got, svcs) || m.has(vm) != (len(svcs) > 0) {
			t.Errorf("%s: %s is in %d services (has %v), want %d", step, vm, len(got), m.has(vm), len(svcs))
		}
	}
	want("empty", "vm1")
	m.join("vm1", a)
	m.join("vm1", a)
	want("joined a twice", "vm1", a)
	m.join("vm1", b)
	m.join("vm1", c)
	m.join("vm1", b)
	want("joined b and c", "vm1", a, b, c)
	m.join("vm2", c)
	m.leave("vm1", a)
	want("left a", "vm1", b, c)
	m.leave("vm1", c)
	want("left c", "vm1", b)
	if m.one["vm1"] != b || m.more["vm1"] != nil {
		t.Error("a VM back in one service is not held as a single pointer")
	}
	m.leave("vm1", a) // not a member: nothing changes
	want("left a again", "vm1", b)
	m.leave("vm1", b)
	want("left b", "vm1")
	want("other VM untouched", "vm2", c)
	// of returns a copy: changing it does not change the memberships.
	m.join("vm2", a)
	got := m.of("vm2")
	got[0] = nil
	if slices.Contains(m.of("vm2"), nil) {
		t.Error("of returned the stored slice")
	}
}
