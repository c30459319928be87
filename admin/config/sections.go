package config

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/records"
	"github.com/tritondatacenter/cns/serve/policy"
)

// The sections that combine several keys, each in the type of the part
// that applies it: the updater's records and zone apexes, the store's
// options, the DNS server's transfer policy. The other keys are parsed
// straight into their consumers' types (Config's fields).

// RecordsConfig is what record generation needs.
func (c *Config) RecordsConfig() records.Config {
	rc := records.Config{UseAlias: c.UseAlias, UseLogin: c.UseLogin,
		ReverseV4Prefix: c.ReverseV4Prefix, ReverseV6Prefix: c.ReverseV6Prefix, ClientNetworks: c.ClientAnswers.Networks}
	for _, z := range c.Forward {
		rc.Zones = append(rc.Zones, records.Zone{Name: z.Name, Networks: z.Networks})
	}
	return rc
}

// ZoneConfig is the apex of every zone: SOA values of the reference
// (refresh 30, retry 60, expire 30 days, minimum 30) and its NS rule.
func (c *Config) ZoneConfig() db.ZoneConfig {
	zc := db.ZoneConfig{Forward: map[string]db.Apex{}, Reverse: c.apex(c.Reverse.Peers, c.Reverse.HiddenPrimary)}
	for _, z := range c.Forward {
		zc.Forward[z.Name] = c.apex(z.Peers, z.HiddenPrimary)
	}
	for _, r := range c.Aggregate {
		// The region's apex is the aggregator's own, not its sources'
		// (RFD 172's NS pitfall).
		zc.Forward[r.Zone] = c.apex(nil, false)
	}
	if c.Catalog != "" {
		// RFC 9432 §4.1: a catalog's NS is "invalid."; it is data for
		// secondaries, not a zone anyone resolves.
		a := c.apex(nil, false)
		a.NS = []string{"invalid."}
		zc.Catalog = &db.CatalogConfig{Name: c.Catalog, Apex: a}
	}
	return zc
}

// DBOptions are the store's limits from the config.
func (c *Config) DBOptions() db.Options {
	j := c.Journal
	return db.Options{Journal: &j, MaxRRset: c.MaxRRset}
}

// apex builds one zone's SOA and NS: cns itself is the SOA primary and the
// first NS, unless the zone is hidden-primary, when the first peer takes
// its place and cns is left out of the NS set.
func (c *Config) apex(peers []string, hidden bool) db.Apex {
	a := db.Apex{MName: dns.Fqdn(c.MyName), RName: dns.Fqdn(strings.Replace(c.Hostmaster, "@", ".", 1)),
		Refresh: 30, Retry: 60, Expire: 2592000, Minimum: 30, SOATTL: 30, NSTTL: 3600}
	var names []string
	if !hidden {
		names = append(names, c.MyName)
	}
	for _, p := range peers {
		if _, err := netip.ParseAddr(p); err == nil {
			continue // an address can be a transfer peer, not a name server name
		}
		names = append(names, strings.ToLower(p))
	}
	if hidden && len(names) > 0 {
		a.MName = dns.Fqdn(names[0])
	}
	seen := map[string]bool{}
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			a.NS = append(a.NS, dns.Fqdn(n))
		}
	}
	return a
}

// Transfers is the DNS server's transfer and NOTIFY policy: the zones'
// peers (names or addresses, looked up by serve.ResolveTransfers) and
// NOTIFY targets, allow_transfer, the keys and the catalog.
func (c *Config) Transfers() policy.Transfers {
	t := policy.Transfers{AllowTransfer: c.AllowTransfer, MinNotifyInterval: c.MinNotifyInterval, Catalog: c.Catalog,
		Keys: c.TSIGKeys, PeerKeys: c.PeerKeys,
		Reverse: policy.ZonePeers{Peers: c.Reverse.Peers, Notify: append(slices.Clone(c.AlsoNotify), c.Reverse.AlsoNotify...)}}
	for _, z := range c.Forward {
		t.Zones = append(t.Zones, policy.ZonePeers{Zone: z.Name, Peers: z.Peers, Notify: append(slices.Clone(c.AlsoNotify), z.AlsoNotify...)})
	}
	return t
}
