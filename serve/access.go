package serve

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/serve/policy"
)

// Access is who may transfer which zone, who is notified, and with which
// TSIG keys. The caller builds it from configuration (resolving peer names)
// and may replace it at any time with SetAccess.
type Access struct {
	// AllowTransfer may transfer every zone.
	AllowTransfer []netip.Prefix
	// Zones holds per forward zone policy; Reverse applies to every reverse
	// zone (and the catalog zone).
	Zones   map[string]ZoneAccess
	Reverse ZoneAccess
	// Keys are the TSIG keys by name.
	Keys []policy.Key
	// PeerKeys names the key an address must sign with; transfers from it
	// without that signature are refused, and NOTIFYs to it are signed.
	PeerKeys map[netip.Addr]string
	// MinNotifyInterval spaces NOTIFYs to one peer for one zone: a burst
	// of commits sends one.
	MinNotifyInterval time.Duration // 0: 1 s
}

// ZoneAccess is one zone's secondaries.
type ZoneAccess struct {
	// Peers are the configured secondaries' addresses: they may transfer
	// and are notified on port 53.
	Peers []netip.Addr
	// Notify are also_notify targets: notified at their port, and allowed
	// to transfer.
	Notify []netip.AddrPort
}

// access is Access compiled for lookups.
type access struct {
	Access
	keys map[string]*tsigKey // by fully qualified lower-case name
	// secondaries are the addresses the config names as a zone's peers or
	// NOTIFY targets.
	secondaries map[netip.Addr]bool
}

func compileAccess(a *Access) (*access, error) {
	c := &access{Access: *a, keys: map[string]*tsigKey{}, secondaries: map[netip.Addr]bool{}}
	for _, za := range append(slices.Collect(maps.Values(a.Zones)), a.Reverse) {
		for _, p := range za.Peers {
			c.secondaries[p.Unmap()] = true
		}
		for _, n := range za.Notify {
			c.secondaries[n.Addr().Unmap()] = true
		}
	}
	for _, k := range a.Keys {
		tk, err := newTSIGKey(k)
		if err != nil {
			return nil, err
		}
		c.keys[tk.nameStr] = tk
	}
	for addr, name := range a.PeerKeys {
		if c.keys[strings.ToLower(fqdn(name))] == nil {
			return nil, fmt.Errorf("peer %s: tsig key %q is not defined", addr, name)
		}
	}
	return c, nil
}

func fqdn(s string) string {
	if strings.HasSuffix(s, ".") {
		return s
	}
	return s + "."
}

// zone returns the policy of a zone by name.
func (a *access) zone(name string) ZoneAccess {
	if za, ok := a.Zones[name]; ok {
		return za
	}
	return a.Reverse
}

// mayTransfer reports whether addr may transfer zone (by address; the
// key check is separate).
func (a *access) mayTransfer(zone string, addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, p := range a.AllowTransfer {
		if p.Contains(addr) {
			return true
		}
	}
	za := a.zone(zone)
	if slices.Contains(za.Peers, addr) {
		return true
	}
	for _, n := range za.Notify {
		if n.Addr().Unmap() == addr {
			return true
		}
	}
	return false
}

// requiredKey returns the TSIG key an address must use, or nil.
func (a *access) requiredKey(addr netip.Addr) *tsigKey {
	name, ok := a.PeerKeys[addr.Unmap()]
	if !ok {
		return nil
	}
	return a.keys[strings.ToLower(fqdn(name))]
}

// notifyTargets lists where a change of zone is announced: also_notify
// entries at their port, configured peers at port 53.
func (a *access) notifyTargets(zone string) []netip.AddrPort {
	za := a.zone(zone)
	out := slices.Clone(za.Notify)
	for _, p := range za.Peers {
		ap := netip.AddrPortFrom(p, 53)
		if !slices.Contains(out, ap) {
			out = append(out, ap)
		}
	}
	return out
}

// configured reports whether the config names addr as a secondary of any
// zone: a peer (on port 53) or an also_notify target (at its port).
func (a *access) configured(addr netip.Addr) bool { return a.secondaries[addr.Unmap()] }
