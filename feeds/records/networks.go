package records

import (
	"net/netip"
	"regexp"
	"strings"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// NIC tags of the networks CNS never publishes: Triton's admin network
// (untagged) and Manta's network, with their rack-aware variants, as
// triton-netconfig recognises them (TRITON-815). Their names are found
// through binder, not CNS.
var (
	adminNICTag = regexp.MustCompile(`(?i)^admin(_rack_[a-z0-9_-]+)?$`)
	mantaNICTag = regexp.MustCompile(`(?i)^manta(_rack_[a-z0-9_-]+)?$`)
)

// hiddenNIC reports whether a NIC is on the admin network (untagged) or
// the Manta network.
func hiddenNIC(nic *dc.NIC) bool {
	untagged := nic.VLANID == nil || *nic.VLANID == 0
	return (adminNICTag.MatchString(nic.NICTag) && untagged) || mantaNICTag.MatchString(nic.NICTag)
}

// nicZones returns the indexes into cfg.Zones of the zones that publish
// a NIC's addresses, in configuration order and each once: the zones that
// list the NIC's network or a pool containing it, or, when none does,
// every zone that lists "*" (CNS-67, triton-cns#3).
func nicZones(cfg *Config, w *World, nic *dc.NIC) []int {
	if hiddenNIC(nic) {
		return nil
	}
	var pools []string
	if w != nil {
		pools = w.Pools[nic.NetworkUUID]
	}
	var explicit, wildcard []int
	for i := range cfg.Zones {
		z := &cfg.Zones[i]
		if z.wildcard() {
			wildcard = append(wildcard, i)
		}
		if nic.NetworkUUID != "" && z.lists(nic.NetworkUUID, pools) {
			explicit = append(explicit, i)
		}
	}
	if len(explicit) > 0 {
		return explicit
	}
	return wildcard
}

// wildcard reports whether the zone takes the NICs no other zone takes.
func (z *Zone) wildcard() bool {
	for _, n := range z.Networks {
		if n == "*" {
			return true
		}
	}
	return false
}

// lists reports whether the zone names the network or one of its pools.
func (z *Zone) lists(network string, pools []string) bool {
	for _, n := range z.Networks {
		if strings.EqualFold(n, network) {
			return true
		}
		for _, pool := range pools {
			if strings.EqualFold(n, pool) {
				return true
			}
		}
	}
	return false
}

// nicAddrs returns the fixed addresses of the VM's i-th NIC. Prefix lengths are dropped
// and the placeholders "dhcp" and "addrconf" skipped (CNS-33, CNS-122);
// anything else that is not an address is reported, not fatal.
func nicAddrs(i int, nic *dc.NIC, p *problems) []netip.Addr {
	var addrs []netip.Addr
	for _, s := range nic.Addresses() {
		host, _, _ := strings.Cut(s, "/")
		if host == "dhcp" || host == "addrconf" {
			continue
		}
		a, err := netip.ParseAddr(host)
		if err != nil || a.Zone() != "" {
			p.addf("nics[%d]: address %q is not an IP address", i, s)
			continue
		}
		// An IPv4-mapped IPv6 address is an IPv4 host.
		addrs = append(addrs, a.Unmap())
	}
	return addrs
}

// networkLabel returns the cleaned network name that prefixes the
// network-name variants of a NIC's names (CNS-170), or "" when there are
// none: the network is unknown or not owned by the VM's owner.
func networkLabel(w *World, nic *dc.NIC, owner string, p *problems) string {
	if w == nil || nic.NetworkUUID == "" {
		return ""
	}
	n := w.Networks[nic.NetworkUUID]
	if n == nil || !ownedBy(n, owner) {
		return ""
	}
	l, err := cleanLabel(n.Name)
	if err != nil {
		p.addf("network %s: name %v: no network-name variants", n.UUID, err)
		return ""
	}
	return l
}

func ownedBy(n *dc.Network, owner string) bool {
	for _, o := range n.OwnerUUIDs {
		if strings.EqualFold(o, owner) {
			return true
		}
	}
	return false
}
