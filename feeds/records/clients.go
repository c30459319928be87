package records

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// ClientAddr is an address by which a listed instance is recognised when it
// queries cns itself (client_answers): cns then answers owner-less names
// (web.svc.<zone>, self.inst.<zone>) in its owner's scope.
type ClientAddr struct {
	Addr netip.Addr
	// Fabric, when valid, is the subnet of the fabric network the address
	// is on. Every user's fabric may use the same range, so such an address
	// identifies the instance only to a query that reached cns on an
	// address of its own inside that subnet (cns listening on the fabric).
	Fabric netip.Prefix
}

// clientAddrs returns the addresses of a listed instance's NICs on the
// networks (or in the pools) of cfg.ClientNetworks. A fabric network whose
// subnet is unknown gives none: its addresses could be anyone's.
func clientAddrs(cfg *Config, w *World, vm *dc.VM) []ClientAddr {
	if len(cfg.ClientNetworks) == 0 {
		return nil
	}
	var out []ClientAddr
	var discard problems
	for i := range vm.NICs {
		nic := &vm.NICs[i]
		if nic.NetworkUUID == "" || !clientNetwork(cfg, w, nic.NetworkUUID) {
			continue
		}
		var fabric netip.Prefix
		if w != nil {
			if n := w.Networks[nic.NetworkUUID]; n != nil && n.Fabric {
				p, err := netip.ParsePrefix(n.Subnet)
				if err != nil {
					continue
				}
				fabric = p.Masked()
			}
		}
		for _, a := range nicAddrs(i, nic, &discard) {
			out = append(out, ClientAddr{Addr: a, Fabric: fabric})
		}
	}
	return out
}

// clientNetwork reports whether cfg.ClientNetworks names the network or a
// pool that contains it.
func clientNetwork(cfg *Config, w *World, network string) bool {
	var pools []string
	if w != nil {
		pools = w.Pools[network]
	}
	for _, n := range cfg.ClientNetworks {
		if strings.EqualFold(n, network) {
			return true
		}
		for _, p := range pools {
			if strings.EqualFold(n, p) {
				return true
			}
		}
	}
	return false
}

// instanceZones returns the forward zones that publish one of the VM's
// NICs, so hold its instance names, in configuration order.
func instanceZones(cfg *Config, w *World, vm *dc.VM) []string {
	var out []string
	for i := range vm.NICs {
		for _, zi := range nicZones(cfg, w, &vm.NICs[i]) {
			if name := zoneName(&cfg.Zones[zi]); !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}
