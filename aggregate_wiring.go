package main

import (
	"log/slog"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/aggregate"
)

// aggregateOptions are the aggregator's sources from the config's
// aggregate key, with their TSIG keys.
func aggregateOptions(cfg *config.Config, store *db.DB, u *feeds.Updater, log *slog.Logger) aggregate.Options {
	keys := map[string]*aggregate.Key{}
	for _, k := range cfg.TSIGKeys {
		alg := k.Algorithm
		if alg == "" {
			alg = "hmac-sha256"
		}
		keys[k.Name] = &aggregate.Key{Name: dns.Fqdn(strings.ToLower(k.Name)), Algorithm: dns.Fqdn(strings.ToLower(alg)), Secret: k.Secret}
	}
	o := aggregate.Options{Store: store, Sink: u, Logger: log}
	for _, r := range cfg.Aggregate {
		region := aggregate.Region{Zone: r.Zone}
		for _, src := range r.Sources {
			s := aggregate.Source{Zone: src.Zone, Key: keys[src.Key]}
			for _, p := range src.Primaries {
				s.Primaries = append(s.Primaries, p.String())
			}
			region.Sources = append(region.Sources, s)
		}
		o.Regions = append(o.Regions, region)
	}
	return o
}

// notified is serve's NOTIFY hook: the aggregator's sources are the only
// zones cns follows.
func (s *service) notified(zone string, from netip.Addr, key string) bool {
	return s.agg.Notified(zone, from, key)
}
