package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/aggregate"
	"github.com/tritondatacenter/cns/serve/policy"
)

// Standalone reports whether the config is an aggregator with no feed of
// its own (RFD 172's replica): aggregate set, and no inventory_file, no
// SDC API options and no forward_zones.
func (c *Config) Standalone() bool {
	return len(c.Aggregate) > 0 && c.InventoryFile == "" && len(c.Forward) == 0 && !c.sdcConfigured
}

// parseAggregate runs after forward_zones, the feeds' keys and tsig_keys:
// the sources' keys are the TSIG keys, as the aggregator uses them (names
// and algorithms fully qualified, hmac-sha256 by default).
func parseAggregate(p *parser) error {
	raw, ok := p.top["aggregate"]
	if !ok || string(raw) == "null" {
		return nil
	}
	var regions map[string]struct {
		Sources []struct {
			Zone      string   `json:"zone"`
			Primaries []string `json:"primaries"`
			Key       string   `json:"key"`
		} `json:"sources"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&regions); err != nil {
		return p.bad("aggregate", "%s (want {\"region zone\": {\"sources\": [{\"zone\", \"primaries\", \"key\"}]}})", typeProblem(err))
	}
	zones := map[string]string{} // every zone name → where it is configured
	for _, z := range p.c.Forward {
		zones[z.Name] = fmt.Sprintf("forward_zones[%q]", z.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(regions)) {
		region := strings.ToLower(strings.TrimSuffix(name, "."))
		key := fmt.Sprintf("aggregate[%q]", name)
		if _, ok := dns.IsDomainName(region); !ok || region == "" || !hostnameRE.MatchString(region) {
			return p.bad(key, "%q is not a valid zone name", name)
		}
		if where, dup := zones[region]; dup {
			return p.bad(key, "zone is also %s", where)
		}
		zones[region] = key
		r := aggregate.Region{Zone: region}
		if len(regions[name].Sources) == 0 {
			return p.bad(key+".sources", "at least one source zone is required")
		}
		for i, s := range regions[name].Sources {
			skey := fmt.Sprintf("%s.sources[%d]", key, i)
			src := aggregate.Source{Zone: strings.ToLower(strings.TrimSuffix(s.Zone, "."))}
			if _, ok := dns.IsDomainName(src.Zone); !ok || src.Zone == "" || src.Zone == region {
				return p.bad(skey+".zone", "%q is not a valid source zone (and must differ from the region)", s.Zone)
			}
			if slices.ContainsFunc(r.Sources, func(x aggregate.Source) bool { return x.Zone == src.Zone }) {
				return p.bad(skey+".zone", "%q is listed twice", s.Zone)
			}
			if len(s.Primaries) == 0 {
				return p.bad(skey+".primaries", "at least one primary (ip or ip:port) is required")
			}
			primaries, err := p.notifyTargets(skey+".primaries", s.Primaries)
			if err != nil {
				return err
			}
			for _, ap := range primaries {
				src.Primaries = append(src.Primaries, ap.String())
			}
			if s.Key != "" {
				ki := slices.IndexFunc(p.c.TSIGKeys, func(k policy.Key) bool { return k.Name == s.Key })
				if ki < 0 {
					return p.bad(skey+".key", "key %q is not in tsig_keys", s.Key)
				}
				k := p.c.TSIGKeys[ki]
				src.Key = &aggregate.Key{Name: dns.Fqdn(strings.ToLower(k.Name)), Algorithm: dns.Fqdn(strings.ToLower(cmp.Or(k.Algorithm, "hmac-sha256"))), Secret: k.Secret}
			}
			r.Sources = append(r.Sources, src)
		}
		p.c.Aggregate = append(p.c.Aggregate, r)
	}
	if len(p.c.Forward) == 0 && !p.c.Standalone() {
		return p.bad("forward_zones", "required: the config has a feed (inventory_file or SDC API options); only an aggregator without a feed may leave it out")
	}
	return nil
}
