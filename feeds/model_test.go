package feeds_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// A change of an account, or of a compute node's down decision, marks the
// VMs the account owns or the node runs, and only those (the model finds
// them by looking through its VMs: it keeps no index of them).
func TestAccountAndComputeNodeChangesMarkTheirVMs(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 300, Seed: 3})
	_, u := windowUpdater(t, time.Millisecond)
	u.SetInventory(inv, "load")
	flushAll(t, u)
	owned, run := map[string]int{}, map[string]int{}
	for _, vm := range inv.VMs {
		owned[strings.ToLower(vm.OwnerUUID)]++
		run[strings.ToLower(vm.ServerUUID)]++
	}

	var usr dc.User
	for _, x := range inv.Users {
		if owned[x.UUID] > 1 && dc.Flag(x.TritonCNSEnabled) {
			usr = x
			break
		}
	}
	if usr.UUID == "" {
		t.Fatal("no account with VMs and cns enabled in the generated inventory")
	}
	usr.TritonCNSEnabled = "false"
	u.SetUser(usr, "account changed")
	if got := u.Pending(); got != owned[usr.UUID] {
		t.Errorf("an account's flag flipped: %d VMs marked, want its %d", got, owned[usr.UUID])
	}
	flushAll(t, u)

	servers := append([]dc.Server(nil), inv.Servers...)
	cn := -1
	for i, s := range servers {
		if run[strings.ToLower(s.UUID)] > 1 && s.Setup {
			cn = i
			break
		}
	}
	if cn < 0 {
		t.Fatal("no set-up compute node with VMs in the generated inventory")
	}
	servers[cn].Setup = false // down
	u.SetServers(servers, "compute node down")
	if got, want := u.Pending(), run[strings.ToLower(servers[cn].UUID)]+1; got != want {
		t.Errorf("a compute node went down: %d entries marked, want its %d VMs and itself", got, want-1)
	}
}
