package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/records"
	"github.com/tritondatacenter/cns/feeds/sdc"
	"github.com/tritondatacenter/cns/serve"
)

// Config is cns's configuration: the reference implementation's
// config.json (rendered by config-agent from SAPI), accepted unchanged,
// plus cns's own optional keys.
type Config struct {
	Path string // the file it came from

	MyName        string
	Hostmaster    string
	Forward       []ForwardZone // in file order
	Reverse       ReverseZones
	AllowTransfer []netip.Prefix
	UseLogin      bool
	UseAlias      bool
	// MinNotifyInterval spaces NOTIFYs to one peer (reference default 5 s).
	MinNotifyInterval time.Duration

	// FullPollInterval and ReaperPollInterval are the reference's keys
	// (milliseconds in the file; zero when absent). BatchWindow is how long
	// changes gather into one commit (batch_window_ms, default 100 ms).
	FullPollInterval   time.Duration
	ReaperPollInterval time.Duration
	BatchWindow        time.Duration

	// HysteresisWindow and HysteresisLastMemberDelay are RFD 1's
	// self-removal numbers (hysteresis_window_ms, default 60 s;
	// hysteresis_last_member_delay_ms, default 600 s); zero: the default.
	HysteresisWindow          time.Duration
	HysteresisLastMemberDelay time.Duration

	// SDC API options, kept as given for the SDC feeds.
	VMAPI      json.RawMessage
	CNAPI      json.RawMessage
	NAPI       json.RawMessage
	UFDS       json.RawMessage
	Changefeed json.RawMessage

	// cns's own keys.
	DBPath        string
	DNSListen     []string
	InventoryFile string
	APIListen     string
	APIToken      string // api_server.token: remote callers of mutating endpoints
	APIReadToken  string // api_server.read_token: required for reads when set
	LogLevel      string // log_level: trace, debug, info, warn, error
	HideVersion   bool   // hide_version: version.bind/version.server answer REFUSED
	HideIdentity  bool   // hide_identity: id.server/hostname.bind answer REFUSED

	// Replication.
	AlsoNotify  []netip.AddrPort        // also_notify, every zone
	TSIGKeys    []TSIGKey               // tsig_keys
	PeerKeys    map[string]string       // peer_keys: peer name or address → key name
	Journal     db.JournalLimits        // journal_max_entries, journal_max_bytes, journal_max_age_s
	MaxRRset    int                     // max_rrset (default 90)
	Catalog     string                  // catalog_zone: RFC 9432 catalog of every zone
	RRL         serve.RRL               // rrl: response rate limiting, off by default
	Forwarding  serve.Forwarding        // forwarding: resolve other names for chosen clients
	Propagation serve.PropagationPolicy // propagation: how serials are followed to the secondaries

	// ReverseV4Prefix and ReverseV6Prefix size the reverse zones
	// (reverse_v4_prefix 8, 16 or 24, default 24; reverse_v6_prefix 32, 48
	// or 64, default 64).
	ReverseV4Prefix int
	ReverseV6Prefix int

	// Warnings name keys that were ignored.
	Warnings []string
}

// ForwardZone is one entry of forward_zones.
type ForwardZone struct {
	Name          string
	Networks      []string
	Peers         []string
	HiddenPrimary bool
	AlsoNotify    []netip.AddrPort
}

// TSIGKey is one entry of tsig_keys.
type TSIGKey struct {
	Name, Algorithm, Secret string
}

// ReverseZones is reverse_zones: settings shared by every reverse zone.
type ReverseZones struct {
	Peers         []string
	HiddenPrimary bool
	AlsoNotify    []netip.AddrPort
}

// Defaults for cns's own keys.
const (
	defaultDBPath            = "/data/cns/cns.db"
	defaultMinNotifyInterval = 500 * time.Millisecond
)

var defaultDNSListen = []string{"0.0.0.0:53", "[::]:53"}

// referenceKeys are keys of the reference implementation's config that cns
// reads elsewhere or does not need; they are accepted without a warning.
var referenceKeys = map[string]bool{
	"redis_opts": true, "binder_domain": true, "mahi_opts": true,
	"datacenter_name": true, "dns_domain": true, "instance_uuid": true,
}

// ConfigError is a configuration problem: the file, the key and what is
// wrong with it.
type ConfigError struct {
	File, Key, Problem string
}

func (e *ConfigError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("config %s: %s", e.File, e.Problem)
	}
	return fmt.Sprintf("config %s: %s: %s", e.File, e.Key, e.Problem)
}

var (
	hostnameRE   = regexp.MustCompile(`^[a-zA-Z0-9_]([a-zA-Z0-9_-]{0,62})?(\.[a-zA-Z0-9_]([a-zA-Z0-9_-]{0,62})?)*\.?$`)
	hostmasterRE = regexp.MustCompile(`^[^@.]+@[^@]+$`)
)

// LoadConfig reads and validates a config file. Relative paths inside it
// (db_path, inventory_file) are relative to the file's directory.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{File: path, Problem: err.Error()}
	}
	c, err := ParseConfig(data, path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	for _, p := range []*string{&c.DBPath, &c.InventoryFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return c, nil
}

// ParseConfig validates the JSON of a config file; name is used in errors.
func ParseConfig(data []byte, name string) (*Config, error) {
	bad := func(key, format string, args ...any) error {
		return &ConfigError{File: name, Key: key, Problem: fmt.Sprintf(format, args...)}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := 1 + bytes.Count(data[:se.Offset], []byte("\n"))
			return nil, bad("", "invalid JSON at line %d: %v", line, err)
		}
		return nil, bad("", "invalid JSON: %v", err)
	}
	c := &Config{Path: name, UseAlias: true, DBPath: defaultDBPath, DNSListen: defaultDNSListen, MinNotifyInterval: defaultMinNotifyInterval}
	// get decodes key into v and reports whether it was present.
	get := func(key string, v any) (bool, error) {
		raw, ok := top[key]
		if !ok || string(raw) == "null" {
			return false, nil
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return true, bad(key, "%s", typeProblem(err))
		}
		return true, nil
	}

	if ok, err := get("my_name", &c.MyName); err != nil {
		return nil, err
	} else if !ok || c.MyName == "" {
		return nil, bad("my_name", "required")
	}
	if !hostnameRE.MatchString(c.MyName) {
		return nil, bad("my_name", "%q is not a host name", c.MyName)
	}
	c.MyName = strings.ToLower(strings.TrimSuffix(c.MyName, "."))
	if ok, err := get("hostmaster", &c.Hostmaster); err != nil {
		return nil, err
	} else if !ok {
		return nil, bad("hostmaster", "required")
	}
	if !hostmasterRE.MatchString(c.Hostmaster) {
		return nil, bad("hostmaster", "%q must be an address like hostmaster@example.com (one @, no dots before it)", c.Hostmaster)
	}
	if _, err := dns.PackDomainName(dns.Fqdn(strings.Replace(c.Hostmaster, "@", ".", 1)), make([]byte, 256), 0, nil, false); err != nil {
		return nil, bad("hostmaster", "%q: %v", c.Hostmaster, err)
	}

	raw, ok := top["forward_zones"]
	if !ok {
		return nil, bad("forward_zones", "required")
	}
	zones, err := parseForwardZones(raw, bad)
	if err != nil {
		return nil, err
	}
	c.Forward = zones

	var rev struct {
		Peers         []string `json:"peers"`
		HiddenPrimary bool     `json:"hidden_primary"`
		AlsoNotify    []string `json:"also_notify"`
		HiddenMaster  *bool    `json:"hidden_master"` // pre-CNS-48 name
		Slaves        []string `json:"slaves"`        // pre-CNS-46 name
	}
	if _, err := get("reverse_zones", &rev); err != nil {
		return nil, err
	}
	c.Reverse = ReverseZones{Peers: rev.Peers, HiddenPrimary: rev.HiddenPrimary}
	if c.Reverse.AlsoNotify, err = parseNotifyTargets("reverse_zones.also_notify", rev.AlsoNotify, bad); err != nil {
		return nil, err
	}
	if len(c.Reverse.Peers) == 0 {
		c.Reverse.Peers = rev.Slaves
	}
	if rev.HiddenMaster != nil && !c.Reverse.HiddenPrimary {
		c.Reverse.HiddenPrimary = *rev.HiddenMaster
	}
	if err := checkPeers("reverse_zones", c.Reverse.Peers, c.Reverse.HiddenPrimary, bad); err != nil {
		return nil, err
	}

	var allow []string
	if _, err := get("allow_transfer", &allow); err != nil {
		return nil, err
	}
	for i, a := range allow {
		p, err := parseAddrOrPrefix(a)
		if err != nil {
			return nil, bad(fmt.Sprintf("allow_transfer[%d]", i), "%q is neither an IP address nor a CIDR prefix", a)
		}
		c.AllowTransfer = append(c.AllowTransfer, p)
	}
	if _, err := get("use_login", &c.UseLogin); err != nil {
		return nil, err
	}
	// config-agent's template renders use_alias from a string, so "false"
	// is how an operator turns it off; accept both forms.
	var useAlias any
	if _, err := get("use_alias", &useAlias); err != nil {
		return nil, err
	}
	switch v := useAlias.(type) {
	case nil:
	case bool:
		c.UseAlias = v
	case string:
		if v != "true" && v != "false" {
			return nil, bad("use_alias", "want true or false, got %q", v)
		}
		c.UseAlias = v == "true"
	default:
		return nil, bad("use_alias", "want a boolean, got %v", v)
	}
	for key, dst := range map[string]*time.Duration{"min_notify_interval": &c.MinNotifyInterval,
		"full_poll_interval": &c.FullPollInterval, "reaper_poll_interval": &c.ReaperPollInterval,
		"batch_window_ms": &c.BatchWindow} {
		var ms float64
		if ok, err := get(key, &ms); err != nil {
			return nil, err
		} else if ok {
			if ms < 0 {
				return nil, bad(key, "must not be negative")
			}
			*dst = time.Duration(ms * float64(time.Millisecond))
		}
	}
	for key, dst := range map[string]*time.Duration{"hysteresis_window_ms": &c.HysteresisWindow,
		"hysteresis_last_member_delay_ms": &c.HysteresisLastMemberDelay} {
		var ms float64
		if ok, err := get(key, &ms); err != nil {
			return nil, err
		} else if ok {
			if ms < 1 {
				return nil, bad(key, "must be at least 1 (milliseconds)")
			}
			*dst = time.Duration(ms * float64(time.Millisecond))
		}
	}
	for key, dst := range map[string]*json.RawMessage{"vmapi_opts": &c.VMAPI, "cnapi_opts": &c.CNAPI, "napi_opts": &c.NAPI, "ufds_opts": &c.UFDS, "changefeed_opts": &c.Changefeed} {
		var obj map[string]any
		if ok, err := get(key, &obj); err != nil {
			return nil, err
		} else if ok {
			*dst = top[key]
		}
	}

	if _, err := get("db_path", &c.DBPath); err != nil {
		return nil, err
	}
	if c.DBPath == "" {
		return nil, bad("db_path", "must not be empty")
	}
	if _, err := get("dns_listen", &c.DNSListen); err != nil {
		return nil, err
	}
	for i, a := range c.DNSListen {
		if _, err := netip.ParseAddrPort(a); err != nil {
			return nil, bad(fmt.Sprintf("dns_listen[%d]", i), "%q is not an IP:port address (%v)", a, err)
		}
	}
	if _, err := get("inventory_file", &c.InventoryFile); err != nil {
		return nil, err
	}
	if c.InventoryFile == "" { // the SDC feeds: their keys must be usable
		if _, err := sdc.ParseEndpoints(c.VMAPI, c.CNAPI, c.NAPI, c.UFDS, c.Changefeed); err != nil {
			var oe *sdc.OptionError
			if errors.As(err, &oe) {
				return nil, bad(oe.Key, "%s", oe.Problem)
			}
			return nil, bad("", "%v", err)
		}
	}
	var api struct {
		Listen    string `json:"listen"`
		Token     string `json:"token"`
		ReadToken string `json:"read_token"`
	}
	if ok, err := get("api_server", &api); err != nil {
		return nil, err
	} else if ok && api.Listen != "" {
		if _, err := netip.ParseAddrPort(api.Listen); err != nil {
			return nil, bad("api_server.listen", "%q is not an IP:port address (%v)", api.Listen, err)
		}
		c.APIListen = api.Listen
	}
	c.APIToken, c.APIReadToken = api.Token, api.ReadToken
	if _, err := get("log_level", &c.LogLevel); err != nil {
		return nil, err
	}
	if _, err := parseLogLevel(c.LogLevel); err != nil {
		return nil, bad("log_level", "%v", err)
	}
	if _, err := get("hide_version", &c.HideVersion); err != nil {
		return nil, err
	}
	if _, err := get("hide_identity", &c.HideIdentity); err != nil {
		return nil, err
	}

	var notify []string
	if _, err := get("also_notify", &notify); err != nil {
		return nil, err
	}
	if c.AlsoNotify, err = parseNotifyTargets("also_notify", notify, bad); err != nil {
		return nil, err
	}
	var keys map[string]struct {
		Algorithm string `json:"algorithm"`
		Secret    string `json:"secret"`
	}
	if _, err := get("tsig_keys", &keys); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		k := keys[name]
		key := fmt.Sprintf("tsig_keys[%q]", name)
		if _, ok := dns.IsDomainName(name); !ok || name == "" {
			return nil, bad(key, "%q is not a valid key name", name)
		}
		switch strings.ToLower(k.Algorithm) {
		case "", "hmac-sha256", "hmac-sha1", "hmac-sha224", "hmac-sha384", "hmac-sha512":
		default:
			return nil, bad(key+".algorithm", "%q is not supported (hmac-sha256, hmac-sha1, hmac-sha224, hmac-sha384, hmac-sha512)", k.Algorithm)
		}
		if b, err := base64.StdEncoding.DecodeString(k.Secret); err != nil || len(b) == 0 {
			return nil, bad(key+".secret", "must be a non-empty base64 string")
		}
		c.TSIGKeys = append(c.TSIGKeys, TSIGKey{Name: name, Algorithm: k.Algorithm, Secret: k.Secret})
	}
	if _, err := get("peer_keys", &c.PeerKeys); err != nil {
		return nil, err
	}
	for peer, key := range c.PeerKeys {
		if _, ok := keys[key]; !ok {
			return nil, bad(fmt.Sprintf("peer_keys[%q]", peer), "key %q is not in tsig_keys", key)
		}
	}
	c.Journal = db.DefaultJournalLimits
	var jn struct {
		Entries *int     `json:"journal_max_entries"`
		Bytes   *int64   `json:"journal_max_bytes"`
		Age     *float64 `json:"journal_max_age_s"`
	}
	if err := json.Unmarshal(data, &jn); err != nil {
		return nil, bad("journal_max_*", "%s", typeProblem(err))
	}
	if jn.Entries != nil {
		if *jn.Entries < 1 {
			return nil, bad("journal_max_entries", "must be at least 1")
		}
		c.Journal.MaxEntries = *jn.Entries
	}
	if jn.Bytes != nil {
		if *jn.Bytes < 4096 {
			return nil, bad("journal_max_bytes", "must be at least 4096")
		}
		c.Journal.MaxBytes = *jn.Bytes
	}
	if jn.Age != nil {
		if *jn.Age <= 0 {
			return nil, bad("journal_max_age_s", "must be positive")
		}
		c.Journal.MaxAge = time.Duration(*jn.Age * float64(time.Second))
	}
	c.MaxRRset = db.DefaultMaxRRset
	if ok, err := get("max_rrset", &c.MaxRRset); err != nil {
		return nil, err
	} else if ok && (c.MaxRRset < 1 || c.MaxRRset > 1000) {
		return nil, bad("max_rrset", "must be between 1 and 1000")
	}
	c.ReverseV4Prefix = records.DefaultReverseV4Prefix
	if ok, err := get("reverse_v4_prefix", &c.ReverseV4Prefix); err != nil {
		return nil, err
	} else if ok && !records.ValidReverseV4Prefix(c.ReverseV4Prefix) {
		return nil, bad("reverse_v4_prefix", "must be 8, 16 or 24, got %d", c.ReverseV4Prefix)
	}
	c.ReverseV6Prefix = records.DefaultReverseV6Prefix
	if ok, err := get("reverse_v6_prefix", &c.ReverseV6Prefix); err != nil {
		return nil, err
	} else if ok && !records.ValidReverseV6Prefix(c.ReverseV6Prefix) {
		return nil, bad("reverse_v6_prefix", "must be 32, 48 or 64, got %d", c.ReverseV6Prefix)
	}
	var rrl struct {
		Rate   int      `json:"responses_per_second"`
		Slip   *int     `json:"slip"`
		V4     int      `json:"ipv4_prefix"`
		V6     int      `json:"ipv6_prefix"`
		Exempt []string `json:"exempt"`
	}
	if ok, err := get("rrl", &rrl); err != nil {
		return nil, err
	} else if ok {
		if rrl.Rate < 0 {
			return nil, bad("rrl.responses_per_second", "must not be negative")
		}
		slip := 2 // Knot's and NSD's default
		if rrl.Slip != nil {
			slip = *rrl.Slip
		}
		if slip < 0 || slip > 100 {
			return nil, bad("rrl.slip", "must be between 0 and 100")
		}
		if rrl.V4 < 0 || rrl.V4 > 32 {
			return nil, bad("rrl.ipv4_prefix", "must be between 1 and 32")
		}
		if rrl.V6 < 0 || rrl.V6 > 128 {
			return nil, bad("rrl.ipv6_prefix", "must be between 1 and 128")
		}
		c.RRL = serve.RRL{ResponsesPerSecond: rrl.Rate, Slip: slip, IPv4Prefix: rrl.V4, IPv6Prefix: rrl.V6}
		for i, e := range rrl.Exempt {
			p, err := parseAddrOrPrefix(e)
			if err != nil {
				return nil, bad(fmt.Sprintf("rrl.exempt[%d]", i), "%q is neither an IP address nor a CIDR prefix", e)
			}
			c.RRL.Exempt = append(c.RRL.Exempt, p)
		}
	}
	var fwd struct {
		Clients      []string `json:"clients"`
		Upstreams    []string `json:"upstreams"`
		CacheEntries int      `json:"cache_entries"`
		TimeoutMS    int      `json:"timeout_ms"`
	}
	if ok, err := get("forwarding", &fwd); err != nil {
		return nil, err
	} else if ok {
		for i, cl := range fwd.Clients {
			p, err := parseAddrOrPrefix(cl)
			if err != nil {
				return nil, bad(fmt.Sprintf("forwarding.clients[%d]", i), "%q is neither an IP address nor a CIDR prefix", cl)
			}
			c.Forwarding.Clients = append(c.Forwarding.Clients, p)
		}
		if c.Forwarding.Upstreams, err = parseNotifyTargets("forwarding.upstreams", fwd.Upstreams, bad); err != nil {
			return nil, err
		}
		if (len(fwd.Clients) == 0) != (len(fwd.Upstreams) == 0) {
			return nil, bad("forwarding", "needs both clients and upstreams")
		}
		if fwd.CacheEntries < 0 || fwd.TimeoutMS < 0 {
			return nil, bad("forwarding", "cache_entries and timeout_ms must not be negative")
		}
		c.Forwarding.CacheEntries = fwd.CacheEntries
		c.Forwarding.Timeout = time.Duration(fwd.TimeoutMS) * time.Millisecond
	}
	var prop struct {
		Threshold   *int     `json:"threshold_percent"`
		Delay       *float64 `json:"poll_delay_ms"`
		Interval    *float64 `json:"poll_interval_ms"`
		Timeout     *float64 `json:"poll_timeout_ms"`
		Retries     *int     `json:"poll_max_retries"`
		SyncSeconds *float64 `json:"periodic_sync_interval_s"`
	}
	if ok, err := get("propagation", &prop); err != nil {
		return nil, err
	} else if ok {
		ms := func(v *float64) time.Duration {
			if v == nil {
				return 0
			}
			return time.Duration(*v * float64(time.Millisecond))
		}
		if prop.Threshold != nil {
			if *prop.Threshold < 1 || *prop.Threshold > 100 {
				return nil, bad("propagation.threshold_percent", "must be between 1 and 100")
			}
			c.Propagation.ThresholdPercent = *prop.Threshold
		}
		for key, v := range map[string]*float64{"poll_delay_ms": prop.Delay, "poll_interval_ms": prop.Interval, "poll_timeout_ms": prop.Timeout, "periodic_sync_interval_s": prop.SyncSeconds} {
			if v != nil && *v <= 0 {
				return nil, bad("propagation."+key, "must be positive")
			}
		}
		c.Propagation.PollDelay, c.Propagation.PollInterval, c.Propagation.PollTimeout = ms(prop.Delay), ms(prop.Interval), ms(prop.Timeout)
		if prop.SyncSeconds != nil {
			c.Propagation.PeriodicSync = time.Duration(*prop.SyncSeconds * float64(time.Second))
		}
		if prop.Retries != nil {
			if *prop.Retries < 1 {
				return nil, bad("propagation.poll_max_retries", "must be at least 1")
			}
			c.Propagation.PollMaxRetries = *prop.Retries
		}
	}
	if _, err := get("catalog_zone", &c.Catalog); err != nil {
		return nil, err
	}
	if c.Catalog != "" {
		c.Catalog = strings.ToLower(strings.TrimSuffix(c.Catalog, "."))
		if !hostnameRE.MatchString(c.Catalog) {
			return nil, bad("catalog_zone", "%q is not a valid zone name", c.Catalog)
		}
		for _, z := range c.Forward {
			if z.Name == c.Catalog {
				return nil, bad("catalog_zone", "%q is also a forward zone", c.Catalog)
			}
		}
	}

	known := map[string]bool{"my_name": true, "hostmaster": true, "forward_zones": true, "reverse_zones": true,
		"allow_transfer": true, "use_login": true, "use_alias": true, "min_notify_interval": true,
		"full_poll_interval": true, "reaper_poll_interval": true, "batch_window_ms": true,
		"hysteresis_window_ms": true, "hysteresis_last_member_delay_ms": true,
		"vmapi_opts": true, "cnapi_opts": true, "napi_opts": true, "ufds_opts": true, "changefeed_opts": true,
		"db_path": true, "dns_listen": true, "inventory_file": true, "api_server": true,
		"also_notify": true, "tsig_keys": true, "peer_keys": true, "journal_max_entries": true,
		"journal_max_bytes": true, "journal_max_age_s": true, "max_rrset": true, "catalog_zone": true, "rrl": true, "forwarding": true, "propagation": true,
		"reverse_v4_prefix": true, "reverse_v6_prefix": true,
		"log_level": true, "hide_version": true, "hide_identity": true}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if !known[k] && !referenceKeys[k] {
			c.Warnings = append(c.Warnings, fmt.Sprintf("config %s: unknown key %q ignored", name, k))
		}
	}
	return c, nil
}

// parseForwardZones decodes forward_zones keeping the file's order, which
// is the order zones are tried for a NIC.
func parseForwardZones(raw json.RawMessage, bad func(string, string, ...any) error) ([]ForwardZone, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, bad("forward_zones", "want an object of zone name to zone settings")
	}
	var out []ForwardZone
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, bad("forward_zones", "%v", err)
		}
		name := strings.ToLower(strings.TrimSuffix(t.(string), "."))
		key := fmt.Sprintf("forward_zones[%q]", name)
		var z struct {
			Networks      []string `json:"networks"`
			Peers         []string `json:"peers"`
			HiddenPrimary bool     `json:"hidden_primary"`
			Slaves        []string `json:"slaves"`
			HiddenMaster  *bool    `json:"hidden_master"`
			AlsoNotify    []string `json:"also_notify"`
		}
		if err := dec.Decode(&z); err != nil {
			return nil, bad(key, "%s", typeProblem(err))
		}
		if _, ok := dns.IsDomainName(name); !ok || name == "" || !hostnameRE.MatchString(name) {
			return nil, bad(key, "%q is not a valid zone name", t)
		}
		if seen[name] {
			return nil, bad(key, "zone listed twice (zone names are case-insensitive)")
		}
		seen[name] = true
		if len(z.Networks) == 0 {
			return nil, bad(key+".networks", "required: at least one network or pool UUID, or \"*\"")
		}
		for i, n := range z.Networks {
			if n != "*" && !dc.IsUUID(n) {
				return nil, bad(fmt.Sprintf("%s.networks[%d]", key, i), "%q is neither \"*\" nor a UUID", n)
			}
			z.Networks[i] = strings.ToLower(n)
		}
		if len(z.Peers) == 0 {
			z.Peers = z.Slaves
		}
		if z.HiddenMaster != nil && !z.HiddenPrimary {
			z.HiddenPrimary = *z.HiddenMaster
		}
		if err := checkPeers(key, z.Peers, z.HiddenPrimary, bad); err != nil {
			return nil, err
		}
		notify, err := parseNotifyTargets(key+".also_notify", z.AlsoNotify, bad)
		if err != nil {
			return nil, err
		}
		out = append(out, ForwardZone{Name: name, Networks: z.Networks, Peers: z.Peers, HiddenPrimary: z.HiddenPrimary, AlsoNotify: notify})
	}
	if len(out) == 0 {
		return nil, bad("forward_zones", "at least one zone is required")
	}
	return out, nil
}

func checkPeers(key string, peers []string, hidden bool, bad func(string, string, ...any) error) error {
	for i, p := range peers {
		if !hostnameRE.MatchString(p) {
			if _, err := netip.ParseAddr(p); err != nil {
				return bad(fmt.Sprintf("%s.peers[%d]", key, i), "%q is neither a host name nor an IP address", p)
			}
		}
	}
	if hidden && len(peers) == 0 {
		return bad(key+".hidden_primary", "needs at least one peer: the first peer becomes the SOA primary")
	}
	return nil
}

// parseNotifyTargets accepts "ip", "ip:port" and "[ipv6]:port" (port 53
// by default).
func parseNotifyTargets(key string, list []string, bad func(string, string, ...any) error) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for i, s := range list {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.AddrPortFrom(a, 53))
			continue
		}
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return nil, bad(fmt.Sprintf("%s[%d]", key, i), "%q is neither an IP address nor ip:port", s)
		}
		out = append(out, ap)
	}
	return out, nil
}

// parseAddrOrPrefix accepts "10.0.0.1" or "10.0.0.0/8" (v4 or v6).
func parseAddrOrPrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// typeProblem turns a json type error into "want T, got V".
func typeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("%s: want %s, got %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("want %s, got %s", te.Type, te.Value)
	}
	return err.Error()
}

// RecordsConfig is what record generation needs.
func (c *Config) RecordsConfig() records.Config {
	rc := records.Config{UseAlias: c.UseAlias, UseLogin: c.UseLogin,
		ReverseV4Prefix: c.ReverseV4Prefix, ReverseV6Prefix: c.ReverseV6Prefix}
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
