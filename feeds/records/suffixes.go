package records

import (
	"slices"
	"strings"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// Suffixes returns the DNS suffixes a new VM of owner on the given networks
// (network or pool UUIDs) will get, as CloudAPI asks before provisioning
// (POST /suffixes-for-vm): for each zone its NICs land in,
// "svc.<owner>.<zone>" then "inst.<owner>.<zone>", each once. <owner> is
// the cleaned login with use_login, else the account UUID. A pool stands
// for a NIC on its first network.
func Suffixes(cfg *Config, w *World, owner *dc.User, networks []string) []string {
	who := owner.UUID
	if cfg.UseLogin {
		if l, err := cleanLabel(owner.Login); err == nil {
			who = l
		}
	}
	var out []string
	for _, n := range networks {
		n = strings.ToLower(n)
		nic := dc.NIC{NetworkUUID: n}
		if w != nil {
			if members := w.PoolNetworks[n]; len(members) > 0 {
				nic.NetworkUUID = members[0]
			}
		}
		for _, zi := range nicZones(cfg, w, &nic) {
			z := cfg.Zones[zi].Name
			for _, s := range []string{"svc." + who + "." + z, "inst." + who + "." + z} {
				if !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		}
	}
	return out
}
