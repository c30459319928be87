package main

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/serve"
)

// peerResolveInterval is how often peer names are looked up again, so a
// secondary that moves keeps its access and its NOTIFYs (the reference
// resolved them once, at start).
const peerResolveInterval = 5 * time.Minute

// transferAccess builds the transfer and NOTIFY policy from the config,
// looking up every peer name (all its addresses). A name that does not
// resolve is logged and left out until the next attempt.
//
// With lookup false, only IP-literal peers count: the policy a server
// starts with, before names are looked up in the background.
func transferAccess(ctx context.Context, c *config.Config, log *slog.Logger, lookup bool) serve.Access {
	names := map[string]bool{}
	for _, z := range c.Forward {
		for _, p := range z.Peers {
			names[p] = true
		}
	}
	for _, p := range c.Reverse.Peers {
		names[p] = true
	}
	for p := range c.PeerKeys {
		names[p] = true
	}
	addrs := resolveAll(ctx, names, log, lookup)

	resolve := func(peers []string) []netip.Addr {
		var out []netip.Addr
		for _, p := range peers {
			for _, a := range addrs[p] {
				if !slices.Contains(out, a) {
					out = append(out, a)
				}
			}
		}
		return out
	}
	a := serve.Access{
		AllowTransfer:     c.AllowTransfer,
		Zones:             map[string]serve.ZoneAccess{},
		MinNotifyInterval: c.MinNotifyInterval,
		PeerKeys:          map[netip.Addr]string{},
	}
	var all serve.ZoneAccess
	merge := func(za serve.ZoneAccess) {
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
	for _, z := range c.Forward {
		za := serve.ZoneAccess{Peers: resolve(z.Peers), Notify: append(slices.Clone(c.AlsoNotify), z.AlsoNotify...)}
		a.Zones[z.Name] = za
		merge(za)
	}
	a.Reverse = serve.ZoneAccess{Peers: resolve(c.Reverse.Peers), Notify: append(slices.Clone(c.AlsoNotify), c.Reverse.AlsoNotify...)}
	merge(a.Reverse)
	if c.Catalog != "" {
		// Every secondary of any zone consumes the catalog.
		a.Zones[c.Catalog] = all
	}
	for _, k := range c.TSIGKeys {
		a.Keys = append(a.Keys, serve.Key{Name: k.Name, Algorithm: k.Algorithm, Secret: k.Secret})
	}
	for peer, key := range c.PeerKeys {
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
