package config

import (
	"time"
)

// Keys is every top-level configuration key, in the order Parse reads
// them (a key that depends on another comes after it) and cnsadm config
// prints them. The parser, the unknown-key warnings, cnsadm config's
// kinds and help, the reload classification (Diff), the manual's key
// tables (docs/configuration.md), cns.json(5) and the tests' values of
// every key (Example) are all derived from it: adding a key is one entry
// here and its parse function.
var Keys = []Key{
	{Name: "my_name", Default: "required", Kind: String, Section: SectionZones, Cnsadm: Shown, parse: parseMyName,
		Help:    "this server's name: SOA MNAME and first NS",
		Example: `"ns0.example.com"`,
		value:   func(c *Config) any { return c.MyName }},
	{Name: "hostmaster", Default: "required", Kind: String, Section: SectionZones, Cnsadm: Shown, parse: parseHostmaster,
		Help:    "zone contact (SOA RNAME), user@domain",
		Example: `"dns@example.com"`,
		value:   func(c *Config) any { return c.Hostmaster }},
	{Name: "forward_zones", Default: "required", Kind: Object, Section: SectionZones, Cnsadm: ZonesOnly, parse: parseForwardZones,
		Help:    "`{zone: {settings}}` (a zone's settings are below); zones are tried for a NIC in file order",
		Example: `{"us-west-1.cns.example.com": {"networks": ["*"], "peers": ["ns1.example.com"]}, "int.example.com": {"networks": ["c66bd90b-6e21-4a55-a4b5-18f6010c6b14"], "hidden_primary": true, "peers": ["ns2.example.com"]}}`,
		value:   func(c *Config) any { return c.Forward }},
	{Name: "reverse_zones", Kind: Object, Section: SectionZones, Cnsadm: ZonesOnly, parse: parseReverseZones,
		Help:    "`{peers, hidden_primary, also_notify}` for every reverse zone (`cnsadm zones reverse`)",
		Example: `{"peers": ["ns1.example.com"]}`,
		value:   func(c *Config) any { return c.Reverse }},
	{Name: "use_login", Kind: Bool, Section: SectionZones, Cnsadm: Shown, Default: "false",
		parse:   func(p *parser) error { return p.getInto("use_login", &p.c.UseLogin) },
		Help:    "add names with the owner's login",
		Example: `true`,
		value:   func(c *Config) any { return c.UseLogin }},
	{Name: "use_alias", Kind: Bool, Section: SectionZones, Cnsadm: Shown, Default: "true", parse: parseUseAlias,
		Help:    "add names with the VM's alias",
		Example: `false`,
		value:   func(c *Config) any { return c.UseAlias }},
	{Name: "allow_transfer", Kind: List, Section: SectionReplication, Cnsadm: Shown, parse: parseAllowTransfer,
		Help:    "addresses and prefixes allowed to transfer zones (and loopback, always)",
		Example: `["10.0.0.0/8", "192.168.1.2"]`,
		value:   func(c *Config) any { return c.AllowTransfer }},
	{Name: "min_notify_interval", Kind: Number, Section: SectionReplication, Default: "500", parse: nonNegativeMillis("min_notify_interval", func(c *Config) *time.Duration { return &c.MinNotifyInterval }),
		Help:    "ms between NOTIFYs to one peer for one zone (the reference used 5000: cns sends a NOTIFY right after a commit and only coalesces bursts)",
		Example: `250`,
		value:   func(c *Config) any { return c.MinNotifyInterval }},
	{Name: "full_poll_interval", Kind: Number, Section: SectionFeeds, Restart: true, Default: "(the feed's floor)", parse: parseFullPollInterval,
		Help:    "ms; the SDC feed's safety-net re-list (raised to its floor: the changefeed carries changes)",
		Example: `600000`,
		value:   func(c *Config) any { return c.SDC.FullPollInterval }},
	{Name: "reaper_poll_interval", Kind: Number, Section: SectionFeeds, Restart: true, Default: "(the feed's)", parse: nonNegativeMillis("reaper_poll_interval", func(c *Config) *time.Duration { return &c.SDC.ReaperInterval }),
		Help:    "ms; how often the SDC feed looks for destroyed VMs",
		Example: `120000`,
		value:   func(c *Config) any { return c.SDC.ReaperInterval }},
	{Name: "batch_window_ms", Kind: Number, Section: SectionFeeds, Restart: true, Default: "25 (ms)", parse: nonNegativeMillis("batch_window_ms", func(c *Config) *time.Duration { return &c.BatchWindow }),
		Help:    "the shortest time between the starts of two commits: a change after a quiet spell is committed at once, a burst gathers into one commit (one serial) per window",
		Example: `250`,
		value:   func(c *Config) any { return c.BatchWindow }},
	{Name: "hysteresis_window_ms", Kind: Number, Section: SectionFeeds, Restart: true, Default: "60000 (ms)", parse: positiveMillis("hysteresis_window_ms", func(c *Config) *time.Duration { return &c.Hysteresis.Window }),
		Help:    "self-removal hysteresis: the window in which at most max(floor(n/3), 1) members of a service may leave by `triton.cns.status` (see \"Service health\")",
		Example: `30000`,
		value:   func(c *Config) any { return c.Hysteresis.Window }},
	{Name: "hysteresis_last_member_delay_ms", Kind: Number, Section: SectionFeeds, Restart: true, Default: "600000 (ms)", parse: positiveMillis("hysteresis_last_member_delay_ms", func(c *Config) *time.Duration { return &c.Hysteresis.LastMemberDelay }),
		Help:    "how long the last listed member of a service waits before it leaves",
		Example: `300000`,
		value:   func(c *Config) any { return c.Hysteresis.LastMemberDelay }},
	{Name: "removal_guard_window_ms", Kind: Number, Section: SectionFeeds, Restart: true, Default: "60000 (ms)", parse: positiveMillis("removal_guard_window_ms", func(c *Config) *time.Duration { return &c.Guard.Window }),
		Help:    "guard on mass removals: the window in which the removals of one cause (CN down, missing from a listing, owner flag off) are counted (see \"Mass removals\")",
		Example: `30000`,
		value:   func(c *Config) any { return c.Guard.Window }},
	{Name: "removal_guard_min_vms", Kind: Number, Section: SectionFeeds, Restart: true, Default: "20", parse: parseRemovalGuardMinVMs,
		Help:    "removals of one cause within the window are held only when they are more VMs than this ...",
		Example: `50`,
		value:   func(c *Config) any { return c.Guard.MinVMs }},
	{Name: "removal_guard_percent", Kind: Number, Section: SectionFeeds, Restart: true, Default: "25", parse: parseRemovalGuardPercent,
		Help:    "... and more than this percentage of the VMs stored, 1 to 100 (100 turns the guard off)",
		Example: `40`,
		value:   func(c *Config) any { return c.Guard.Percent }},
	{Name: "removal_guard_confirm_ms", Kind: Number, Section: SectionFeeds, Restart: true, Default: "600000 (ms)", parse: positiveMillis("removal_guard_confirm_ms", func(c *Config) *time.Duration { return &c.Guard.Confirm }),
		Help:    "how long held removals wait before the upstream's next answer that still says so applies them",
		Example: `900000`,
		value:   func(c *Config) any { return c.Guard.Confirm }},
	sdcOptionKey("vmapi_opts", `{"address": "vmapi.example.net", "limit": 300}`, "VMAPI: `{\"address\": ...}` and its options (see the SDC feed section)", func(c *Config) any { return c.SDC.VMAPI }),
	sdcOptionKey("cnapi_opts", `{"address": "cnapi.example.net"}`, "CNAPI", func(c *Config) any { return c.SDC.CNAPI }),
	sdcOptionKey("napi_opts", `{"address": "napi.example.net"}`, "NAPI", func(c *Config) any { return c.SDC.NAPI }),
	sdcOptionKey("ufds_opts", `{"address": "ufds.example.net", "bindDN": "cn=other", "bindPassword": "pw"}`, "UFDS (LDAP): address, bindDN, bindPassword", func(c *Config) any { return c.SDC.UFDS }),
	sdcOptionKey("changefeed_opts", `{"resource": "vm", "subResources": ["state"], "instance": "abc"}`, "VMAPI's changefeed", func(c *Config) any { return c.SDC.Changefeed }),
	{Name: "db_path", Kind: String, Section: SectionServer, Restart: true, Default: `"/data/cns/cns.db"`, parse: parseDBPath,
		Help:    "the bbolt file (mode 0600); relative to the config file",
		Example: `"/data/cns/other.db"`,
		value:   func(c *Config) any { return c.DBPath }},
	{Name: "dns_listen", Kind: List, Section: SectionServer, Restart: true, Default: `["0.0.0.0:53", "[::]:53"]`, parse: parseDNSListen,
		Help:    "`ip:port` addresses, each served on UDP and TCP",
		Example: `["0.0.0.0:53", "[::]:53", "127.0.0.1:5353"]`,
		value:   func(c *Config) any { return c.DNSListen }},
	{Name: "inventory_file", Kind: String, Section: SectionFeeds, Restart: true, parse: parseInventoryFile,
		Help:    "an inventory file to use instead of the SDC APIs; relative to the config file",
		Example: `"inventory.json"`,
		value:   func(c *Config) any { return c.InventoryFile }},
	{Name: "api_server", Kind: Object, Section: SectionServer, Restart: true, parse: parseAPIServer,
		Help:    "`{\"listen\": \"ip:port\" or a list, \"token\": ..., \"read_token\": ...}`: the REST API (absent listen: port 80 on 127.0.0.1, ::1 and the zone's admin addresses; `[]`: no API), and bearer tokens for remote callers",
		Example: `{"token": "write-token", "read_token": "read-token"}`,
		value:   func(c *Config) any { return []any{c.APIListen, c.APIToken, c.APIReadToken} }},
	{Name: "log_level", Kind: String, Section: SectionServer, Default: "info", parse: parseLogLevel,
		Help:    "trace, debug, info, warn, error; when absent, the LOGLEVEL environment variable (which the reference's SMF manifest sets), else info",
		Example: `"debug"`,
		value:   func(c *Config) any { return c.LogLevel }},
	{Name: "hide_version", Kind: Bool, Section: SectionServer, Restart: true, Default: "false",
		parse:   func(p *parser) error { return p.getInto("hide_version", &p.c.HideVersion) },
		Help:    "answer REFUSED to CHAOS `version.bind` and `version.server`",
		Example: `true`,
		value:   func(c *Config) any { return c.HideVersion }},
	{Name: "hide_identity", Kind: Bool, Section: SectionServer, Restart: true, Default: "false",
		parse:   func(p *parser) error { return p.getInto("hide_identity", &p.c.HideIdentity) },
		Help:    "answer REFUSED to CHAOS `id.server` and `hostname.bind`",
		Example: `true`,
		value:   func(c *Config) any { return c.HideIdentity }},
	{Name: "also_notify", Kind: List, Section: SectionReplication, parse: parseAlsoNotify,
		Help:    "extra NOTIFY targets for every zone: `\"ip\"`, `\"ip:port\"`, `\"[v6]:port\"` (also per zone)",
		Example: `["10.1.1.1", "10.1.1.2:5300"]`,
		value:   func(c *Config) any { return c.AlsoNotify }},
	{Name: "signers", Kind: List, Section: SectionReplication, Restart: true, Default: "(detected)", parse: parseSigners,
		Help:    "addresses of secondaries that sign the zones with DNSSEC under serials of their own (see \"Signing with DNSSEC\"); others are detected",
		Example: `["10.1.1.1", "10.1.1.3"]`,
		value:   func(c *Config) any { return c.Signers }},
	{Name: "tsig_keys", Kind: Object, Section: SectionReplication, parse: parseTSIGKeys,
		Help:    "`{\"name\": {\"algorithm\": \"hmac-sha256\", \"secret\": \"base64\"}}`",
		Example: `{"xfr-key": {"algorithm": "hmac-sha256", "secret": "c2VjcmV0LWtleS1mb3ItdHJhbnNmZXJz"}}`,
		value:   func(c *Config) any { return c.TSIGKeys }},
	{Name: "peer_keys", Kind: Object, Section: SectionReplication, parse: parsePeerKeys,
		Help:    "`{\"peer name or ip\": \"key name\"}`: that peer must sign its transfers, and its NOTIFYs are signed",
		Example: `{"ns1.example.com": "xfr-key"}`,
		value:   func(c *Config) any { return c.PeerKeys }},
	{Name: "aggregate", Kind: Object, Section: SectionReplication, Restart: true, parse: parseAggregate,
		Help:    "region zones made of other cns zones (RFD 172): `{\"us-west.cns.example.com\": {\"sources\": [{\"zone\": \"us-west-1.cns.example.com\", \"primaries\": [\"10.1.0.10\", \"10.1.0.11:53\"], \"key\": \"xfr-key\"}]}}` (`key`: a `tsig_keys` name, optional); without a feed and `forward_zones`, cns is a standalone aggregator (see \"Aggregating data centers\")",
		Example: `{"us-west.cns.example.com": {"sources": [{"zone": "us-west-1.cns.example.com", "primaries": ["10.1.0.10", "10.1.0.11:53"], "key": "xfr-key"}]}}`,
		value:   func(c *Config) any { return c.Aggregate }},
	{Name: "journal_max_entries", Kind: Number, Section: SectionLimits, Restart: true, Default: "2000", parse: parseJournal,
		Help:    "per-zone IXFR journal: most entries kept (oldest dropped first)",
		Example: `500`,
		value:   func(c *Config) any { return c.Journal.MaxEntries }},
	{Name: "journal_max_bytes", Kind: Number, Section: SectionLimits, Restart: true, Default: "16777216", // parsed with journal_max_entries
		Help:    "per-zone IXFR journal: most bytes kept (16 MiB; at least 4096)",
		Example: `1048576`,
		value:   func(c *Config) any { return c.Journal.MaxBytes }},
	{Name: "journal_max_age_s", Kind: Number, Section: SectionLimits, Restart: true, Default: "604800", // parsed with journal_max_entries
		Help:    "per-zone IXFR journal: oldest entry kept, in seconds (7 days)",
		Example: `86400`,
		value:   func(c *Config) any { return c.Journal.MaxAge }},
	{Name: "max_rrset", Kind: Number, Section: SectionLimits, Restart: true, Default: "90", parse: parseMaxRRset,
		Help:    "most records of one type at one name, 1 to 1000 (BIND ≥ 9.18.28 refuses more than 100)",
		Example: `50`,
		value:   func(c *Config) any { return c.MaxRRset }},
	{Name: "reverse_v4_prefix", Kind: Number, Section: SectionZones, Default: "24", parse: parseReverseV4Prefix,
		Help:    "size of the IPv4 reverse zones cns creates: 8, 16 or 24 (with 8, every PTR of 10.0.0.0/8 lands in `10.in-addr.arpa`)",
		Example: `16`,
		value:   func(c *Config) any { return c.ReverseV4Prefix }},
	{Name: "reverse_v6_prefix", Kind: Number, Section: SectionZones, Default: "64", parse: parseReverseV6Prefix,
		Help:    "size of the IPv6 reverse zones: 32, 48 or 64",
		Example: `48`,
		value:   func(c *Config) any { return c.ReverseV6Prefix }},
	{Name: "rrl", Kind: Object, Section: SectionServer, Default: "off", parse: parseRRL,
		Help:    "response rate limiting: `{\"responses_per_second\": 20, \"slip\": 2, \"ipv4_prefix\": 24, \"ipv6_prefix\": 56, \"exempt\": [\"10.0.0.0/8\"]}`",
		Example: `{"responses_per_second": 10, "slip": 3}`,
		value:   func(c *Config) any { return c.RRL }},
	{Name: "forwarding", Kind: Object, Section: SectionServer, Restart: true, Default: "off", parse: parseForwarding,
		Help:    "`{\"clients\": [\"10.0.0.0/8\"], \"upstreams\": [\"10.0.0.2\", \"10.0.0.3:53\"], \"cache_entries\": 10000, \"timeout_ms\": 2000}`",
		Example: `{"clients": ["10.0.0.0/8"], "upstreams": ["10.0.0.2"]}`,
		value:   func(c *Config) any { return c.Forwarding }},
	{Name: "client_answers", Kind: Object, Section: SectionServer, Restart: true, Default: "off", parse: parseClientAnswers,
		Help:    "owner-less names (`web.svc.<zone>`, `self.inst.<zone>`) answered in the asking instance's own scope: `{\"networks\": [\"<network or pool uuid>\"], \"listen\": [\"192.168.128.2:53\"]}` (see \"Short names for instances\")",
		Example: `{"networks": ["c66bd90b-6e21-4a55-a4b5-18f6010c6b14"]}`,
		value:   func(c *Config) any { return c.ClientAnswers }},
	{Name: "propagation", Kind: Object, Section: SectionReplication, Restart: true, Default: "see \"Propagation status\"", parse: parsePropagation,
		Help:    "`{\"threshold_percent\": 100, \"poll_delay_ms\": 50, \"poll_interval_ms\": 200, \"poll_timeout_ms\": 2000, \"poll_max_retries\": 20, \"periodic_sync_interval_s\": 60}`",
		Example: `{"threshold_percent": 50, "poll_interval_ms": 300}`,
		value:   func(c *Config) any { return c.Propagation }},
	{Name: "catalog_zone", Kind: String, Section: SectionZones, parse: parseCatalogZone,
		Help:    "name of an RFC 9432 catalog zone listing every zone",
		Example: `"catalog.example.com"`,
		value:   func(c *Config) any { return c.Catalog }},

	// The reference reads these elsewhere, or cns does not need them:
	// accepted without a warning.
	ignoredKey("redis_opts", Object), ignoredKey("binder_domain", String), ignoredKey("mahi_opts", Object),
	ignoredKey("datacenter_name", String), ignoredKey("dns_domain", String), ignoredKey("instance_uuid", String),
}

// Key is one top-level configuration key.
type Key struct {
	Name    string
	Kind    Kind    // its JSON type, and how cnsadm config writes it
	Section Section // where the manual lists it
	// Default is what an absent key means, as the manual shows it. When it
	// is JSON, Parse applies exactly that value (TestKeyDefaults).
	Default string
	Help    string
	// Restart: only a start applies a change; a reload that finds one
	// restarts cns (service.go).
	Restart bool
	Cnsadm  CnsadmUse // how cnsadm edits it
	// Example is a value other than its default and the reference's, in
	// JSON as config.json and SAPI metadata hold it. The tests set the key
	// to it: Diff must name the key (TestEveryKeyIsCompared) and the SAPI
	// template must render it (smf's TestTemplateFull), so a new key needs
	// no test data of its own there.
	Example string

	// parse reads the key into the parser's Config; nil: the key is parsed
	// with another one, or ignored.
	parse func(*parser) error
	// value is what Diff compares; nil for ignored keys.
	value func(*Config) any
}

// Kind is a key's JSON type.
type Kind int

const (
	String Kind = iota
	Bool
	Number
	List
	Object
)

func (k Kind) String() string {
	return [...]string{"string", "boolean", "number", "list", "object"}[k]
}

// Section groups keys in the manual and cns.json(5).
type Section int

const (
	SectionZones Section = iota
	SectionReplication
	SectionFeeds
	SectionServer
	SectionLimits
	SectionIgnored
)

func (s Section) String() string {
	return [...]string{"Zones and names", "Replication", "Feeds", "Server", "Limits", "Accepted and ignored"}[s]
}

// CnsadmUse is how cnsadm changes a key.
type CnsadmUse int

const (
	Settable  CnsadmUse = iota // cnsadm config key=value
	Shown                      // also printed by cnsadm config, with its help
	ZonesOnly                  // only through cnsadm zones
	Unedited                   // cnsadm does not change it (keys cns ignores)
)

// Editable is the keys cnsadm config may change, in table order.
func Editable() []string {
	var names []string
	for _, k := range Keys {
		if k.Cnsadm == Settable || k.Cnsadm == Shown {
			names = append(names, k.Name)
		}
	}
	return names
}

// ZoneKey is a key of one forward zone's settings (and, where Reverse, of
// reverse_zones).
type ZoneKey struct {
	Name    string
	Kind    Kind
	Help    string
	Reverse bool   // also a key of reverse_zones
	Legacy  string // the key's name in old releases; cnsadm upgrade renames it
}

// ZoneKeys are the settings of a zone, as cnsadm zones edits them.
var ZoneKeys = []ZoneKey{
	{Name: "networks", Kind: List, Help: "network or pool UUIDs, or `\"*\"`: the NICs the zone names (required)"},
	{Name: "peers", Kind: List, Reverse: true, Legacy: "slaves", Help: "the secondaries: names or addresses; they may transfer, and are notified"},
	{Name: "hidden_primary", Kind: Bool, Reverse: true, Legacy: "hidden_master", Help: "the first peer is the SOA primary and cns leaves itself out of the NS set"},
	{Name: "also_notify", Kind: List, Reverse: true, Help: "extra NOTIFY targets for this zone"},
}

// keyIndex finds a key by name.
var keyIndex = func() map[string]*Key {
	m := make(map[string]*Key, len(Keys))
	for i := range Keys {
		m[Keys[i].Name] = &Keys[i]
	}
	return m
}()

// Lookup returns the key named name.
func Lookup(name string) (Key, bool) {
	k, ok := keyIndex[name]
	if !ok {
		return Key{}, false
	}
	return *k, true
}

func nonNegativeMillis(key string, field func(*Config) *time.Duration) func(*parser) error {
	return func(p *parser) error { return p.millis(key, field(p.c), 0, "must not be negative") }
}

func positiveMillis(key string, field func(*Config) *time.Duration) func(*parser) error {
	return func(p *parser) error { return p.millis(key, field(p.c), 1, "must be at least 1 (milliseconds)") }
}

// sdcOptionKey is one of the SDC APIs' *_opts keys; field is where its
// parsed value is kept, which Diff compares (by meaning, not spelling).
func sdcOptionKey(name, example, help string, field func(c *Config) any) Key {
	return Key{Name: name, Kind: Object, Section: SectionFeeds, Restart: true, Help: help, Example: example, parse: parseSDCOption(name), value: field}
}

func ignoredKey(name string, kind Kind) Key {
	return Key{Name: name, Kind: kind, Section: SectionIgnored, Cnsadm: Unedited, Help: "the reference's; cns does not use it"}
}
