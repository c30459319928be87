package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/records"
)

// Zones is the section "Zones and names": the zones and how names are
// made. The updater applies it at a reload (RecordsConfig, ZoneConfig),
// and the DNS server the zones' peers (Transfers).
type Zones struct {
	MyName     string
	Hostmaster string
	Forward    []ForwardZone // forward_zones, in file order
	Reverse    ReverseZones
	UseLogin   bool
	UseAlias   bool
	// ReverseV4Prefix and ReverseV6Prefix size the reverse zones
	// (reverse_v4_prefix 8, 16 or 24, default 24; reverse_v6_prefix 32, 48
	// or 64, default 64).
	ReverseV4Prefix int
	ReverseV6Prefix int
	Catalog         string // catalog_zone: RFC 9432 catalog of every zone
}

// defaultZones is what an absent key of the section means (the key
// table's Default column says the same; TestKeyDefaults holds them
// together).
func defaultZones() Zones {
	return Zones{UseAlias: true, ReverseV4Prefix: records.DefaultReverseV4Prefix, ReverseV6Prefix: records.DefaultReverseV6Prefix}
}

// ForwardZone is one entry of forward_zones.
type ForwardZone struct {
	Name          string
	Networks      []string
	Peers         []string
	HiddenPrimary bool
	AlsoNotify    []netip.AddrPort
}

// ReverseZones is reverse_zones: settings shared by every reverse zone.
type ReverseZones struct {
	Peers         []string
	HiddenPrimary bool
	AlsoNotify    []netip.AddrPort
}

func parseMyName(p *parser) error {
	c := p.c
	if ok, err := p.get("my_name", &c.MyName); err != nil {
		return err
	} else if !ok || c.MyName == "" {
		return p.bad("my_name", "required")
	}
	if !hostnameRE.MatchString(c.MyName) {
		return p.bad("my_name", "%q is not a host name", c.MyName)
	}
	c.MyName = strings.ToLower(strings.TrimSuffix(c.MyName, "."))
	return nil
}

func parseHostmaster(p *parser) error {
	c := p.c
	if ok, err := p.get("hostmaster", &c.Hostmaster); err != nil {
		return err
	} else if !ok {
		return p.bad("hostmaster", "required")
	}
	if !hostmasterRE.MatchString(c.Hostmaster) {
		return p.bad("hostmaster", "%q must be an address like hostmaster@example.com (one @, no dots before it)", c.Hostmaster)
	}
	if _, err := dns.PackDomainName(dns.Fqdn(strings.Replace(c.Hostmaster, "@", ".", 1)), make([]byte, 256), 0, nil, false); err != nil {
		return p.bad("hostmaster", "%q: %v", c.Hostmaster, err)
	}
	return nil
}

// forwardZoneSettings and reverseZoneSettings are the settings as
// written: the current names and the legacy ones (ZoneKeys). They are
// aliases of unnamed struct types because a type error prints the type,
// and operators' messages stay as they were.
type forwardZoneSettings = struct {
	Networks      []string `json:"networks"`
	Peers         []string `json:"peers"`
	HiddenPrimary bool     `json:"hidden_primary"`
	Slaves        []string `json:"slaves"`        // pre-CNS-46 name of peers
	HiddenMaster  *bool    `json:"hidden_master"` // pre-CNS-48 name of hidden_primary
	AlsoNotify    []string `json:"also_notify"`
}

type reverseZoneSettings = struct {
	Peers         []string `json:"peers"`
	HiddenPrimary bool     `json:"hidden_primary"`
	AlsoNotify    []string `json:"also_notify"`
	HiddenMaster  *bool    `json:"hidden_master"` // pre-CNS-48 name
	Slaves        []string `json:"slaves"`        // pre-CNS-46 name
}

// foldLegacy reads the legacy names: each counts only where its new name
// is unset.
func foldLegacy(peers *[]string, hidden *bool, slaves []string, hiddenMaster *bool) {
	if len(*peers) == 0 {
		*peers = slaves
	}
	if hiddenMaster != nil && !*hidden {
		*hidden = *hiddenMaster
	}
}

// parseForwardZones decodes forward_zones keeping the file's order, which
// is the order zones are tried for a NIC.
func parseForwardZones(p *parser) error {
	raw, ok := p.top["forward_zones"]
	_, aggregator := p.top["aggregate"]
	if !ok {
		if aggregator {
			return nil // parseAggregate decides whether it may be absent
		}
		return p.bad("forward_zones", "required")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return p.bad("forward_zones", "want an object of zone name to zone settings")
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return p.bad("forward_zones", "%v", err)
		}
		name := strings.ToLower(strings.TrimSuffix(t.(string), "."))
		key := fmt.Sprintf("forward_zones[%q]", name)
		var z forwardZoneSettings
		if err := dec.Decode(&z); err != nil {
			return p.bad(key, "%s", typeProblem(err))
		}
		if _, ok := dns.IsDomainName(name); !ok || name == "" || !hostnameRE.MatchString(name) {
			return p.bad(key, "%q is not a valid zone name", t)
		}
		if seen[name] {
			return p.bad(key, "zone listed twice (zone names are case-insensitive)")
		}
		seen[name] = true
		zone, err := p.forwardZone(key, name, z)
		if err != nil {
			return err
		}
		p.c.Forward = append(p.c.Forward, zone)
	}
	if len(p.c.Forward) == 0 && !aggregator {
		return p.bad("forward_zones", "at least one zone is required")
	}
	return nil
}

// forwardZone checks one zone's settings; key names it in errors.
func (p *parser) forwardZone(key, name string, z forwardZoneSettings) (ForwardZone, error) {
	if len(z.Networks) == 0 {
		return ForwardZone{}, p.bad(key+".networks", "required: at least one network or pool UUID, or \"*\"")
	}
	for i, n := range z.Networks {
		if n != "*" && !dc.IsUUID(n) {
			return ForwardZone{}, p.bad(fmt.Sprintf("%s.networks[%d]", key, i), "%q is neither \"*\" nor a UUID", n)
		}
		z.Networks[i] = strings.ToLower(n)
	}
	foldLegacy(&z.Peers, &z.HiddenPrimary, z.Slaves, z.HiddenMaster)
	if err := p.checkPeers(key, z.Peers, z.HiddenPrimary); err != nil {
		return ForwardZone{}, err
	}
	notify, err := p.notifyTargets(key+".also_notify", z.AlsoNotify)
	if err != nil {
		return ForwardZone{}, err
	}
	return ForwardZone{Name: name, Networks: z.Networks, Peers: z.Peers, HiddenPrimary: z.HiddenPrimary, AlsoNotify: notify}, nil
}

func parseReverseZones(p *parser) error {
	var rev reverseZoneSettings
	if _, err := p.get("reverse_zones", &rev); err != nil {
		return err
	}
	c := p.c
	c.Reverse = ReverseZones{Peers: rev.Peers, HiddenPrimary: rev.HiddenPrimary}
	var err error
	if c.Reverse.AlsoNotify, err = p.notifyTargets("reverse_zones.also_notify", rev.AlsoNotify); err != nil {
		return err
	}
	foldLegacy(&c.Reverse.Peers, &c.Reverse.HiddenPrimary, rev.Slaves, rev.HiddenMaster)
	return p.checkPeers("reverse_zones", c.Reverse.Peers, c.Reverse.HiddenPrimary)
}

// parseUseAlias accepts a boolean or the strings "true" and "false":
// config-agent's template renders use_alias from a string, so "false" is
// how an operator turns it off.
func parseUseAlias(p *parser) error {
	var useAlias any
	if _, err := p.get("use_alias", &useAlias); err != nil {
		return err
	}
	switch v := useAlias.(type) {
	case nil:
	case bool:
		p.c.UseAlias = v
	case string:
		if v != "true" && v != "false" {
			return p.bad("use_alias", "want true or false, got %q", v)
		}
		p.c.UseAlias = v == "true"
	default:
		return p.bad("use_alias", "want a boolean, got %v", v)
	}
	return nil
}

func parseReverseV4Prefix(p *parser) error {
	c := p.c
	if ok, err := p.get("reverse_v4_prefix", &c.ReverseV4Prefix); err != nil {
		return err
	} else if ok && !records.ValidReverseV4Prefix(c.ReverseV4Prefix) {
		return p.bad("reverse_v4_prefix", "must be 8, 16 or 24, got %d", c.ReverseV4Prefix)
	}
	return nil
}

func parseReverseV6Prefix(p *parser) error {
	c := p.c
	if ok, err := p.get("reverse_v6_prefix", &c.ReverseV6Prefix); err != nil {
		return err
	} else if ok && !records.ValidReverseV6Prefix(c.ReverseV6Prefix) {
		return p.bad("reverse_v6_prefix", "must be 32, 48 or 64, got %d", c.ReverseV6Prefix)
	}
	return nil
}

func parseCatalogZone(p *parser) error {
	c := p.c
	if err := p.getInto("catalog_zone", &c.Catalog); err != nil || c.Catalog == "" {
		return err
	}
	c.Catalog = strings.ToLower(strings.TrimSuffix(c.Catalog, "."))
	if !hostnameRE.MatchString(c.Catalog) {
		return p.bad("catalog_zone", "%q is not a valid zone name", c.Catalog)
	}
	for _, z := range c.Forward {
		if z.Name == c.Catalog {
			return p.bad("catalog_zone", "%q is also a forward zone", c.Catalog)
		}
	}
	return nil
}
