package tui

import (
	"slices"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin"
)

// The VM view shows what client_answers gives a VM, only when it is on.
func TestVMDetailShortNames(t *testing.T) {
	c := &Common{Width: 100, Height: 40, Now: time.Now()}
	vm := &admin.VM{UUID: "a1000000-0000-4000-8000-000000000001", Names: []string{"web.svc.alice.z.example"}}
	if lines := vmDetail(vm, c); slices.ContainsFunc(lines, func(l string) bool { return l == "  web.svc.z.example" }) {
		t.Errorf("short names shown without client_answers:\n%q", lines)
	}
	vm.ClientAddrs, vm.ShortNames = []string{"10.0.0.5"}, []string{"self.inst.z.example", "web.svc.z.example"}
	lines := vmDetail(vm, c)
	i := slices.Index(lines, "asks from:  10.0.0.5")
	if i < 0 || i+3 >= len(lines) || lines[i+2] != "  self.inst.z.example" || lines[i+3] != "  web.svc.z.example" {
		t.Errorf("VM view:\n%q", lines)
	}
}
