package serve

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/tritondatacenter/cns/serve/policy"
)

// PeerResolveInterval is how often peer names are looked up again, so a
// secondary that moves keeps its access and its NOTIFYs (the reference
// resolved them once, at start).
const PeerResolveInterval = 5 * time.Minute

// ResolveTransfers turns the configuration's transfer policy into the
// one the server applies (SetAccess), looking up every peer name (all its
// addresses). A name that does not resolve is logged and left out until
// the next attempt.
//
// With lookup false, only IP-literal peers count: the policy a server
// starts with, before names are looked up in the background.
func ResolveTransfers(ctx context.Context, t policy.Transfers, log *slog.Logger, lookup bool) Access {
	names := map[string]bool{}
	for _, z := range append(slices.Clone(t.Zones), t.Reverse) {
		for _, p := range z.Peers {
			names[p] = true
		}
	}
	for p := range t.PeerKeys {
		names[p] = true
	}
	addrs := resolveAll(ctx, names, log, lookup)

	zoneAccess := func(z policy.ZonePeers) ZoneAccess {
		za := ZoneAccess{Notify: z.Notify}
		for _, p := range z.Peers {
			for _, a := range addrs[p] {
				if !slices.Contains(za.Peers, a) {
					za.Peers = append(za.Peers, a)
				}
			}
		}
		return za
	}
	a := Access{
		AllowTransfer:     withLoopback(t.AllowTransfer),
		Zones:             map[string]ZoneAccess{},
		Reverse:           zoneAccess(t.Reverse),
		Keys:              t.Keys,
		MinNotifyInterval: t.MinNotifyInterval,
		PeerKeys:          map[netip.Addr]string{},
	}
	// Every secondary of any zone consumes the catalog.
	var all ZoneAccess
	merge := func(za ZoneAccess) {
		for _, p := range za.Peers {
			if !slices.Contains(all.Peers, p) {
				all.Peers = append(all.Peers, p)
			}
		}
		for _, n := range za.Notify {
			if !slices.Contains(all.Notify, n) {
				all.Notify = append(all.Notify, n)
			}
		}
	}
	for _, z := range t.Zones {
		za := zoneAccess(z)
		a.Zones[z.Zone] = za
		merge(za)
	}
	merge(a.Reverse)
	if t.Catalog != "" {
		a.Zones[t.Catalog] = all
	}
	for peer, key := range t.PeerKeys {
		for _, addr := range addrs[peer] {
			a.PeerKeys[addr] = key
		}
	}
	return a
}

// resolveAll looks names up in parallel; IP literals stand for themselves.
func resolveAll(ctx context.Context, names map[string]bool, log *slog.Logger, lookup bool) map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name := range names {
		if a, err := netip.ParseAddr(name); err == nil {
			out[name] = []netip.Addr{a.Unmap()}
			continue
		}
		if !lookup {
			continue
		}
		wg.Go(func() {
			lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			ips, err := net.DefaultResolver.LookupNetIP(lctx, "ip", name)
			if err != nil {
				log.Warn("peer name does not resolve; it cannot transfer or be notified until it does", "peer", name, "err", err)
				return
			}
			mu.Lock()
			for _, ip := range ips {
				out[name] = append(out[name], ip.Unmap())
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// loopback may always transfer, as the reference (its template appends
// 127.0.0.1, its code adds ::1 too): local tools (dig, cnsadm, a local
// secondary) must never be REFUSED.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}

// withLoopback is allow plus the loopback addresses it lacks.
func withLoopback(allow []netip.Prefix) []netip.Prefix {
	out := slices.Clone(allow)
	for _, l := range loopback {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}
