package config

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/serve/policy"
)

// Server is the section of that name: the server itself, its db, its
// listeners and API, logging, what it tells about itself, rate limiting,
// forwarding and client-scoped answers.
type Server struct {
	DBPath    string
	DNSListen []string
	// APIListen is api_server.listen: nil when absent (the reference's
	// listeners: port DefaultAPIPort on loopback and the zone's admin
	// addresses), empty for no API.
	APIListen     []string
	APIToken      string               // api_server.token: remote callers of mutating endpoints
	APIReadToken  string               // api_server.read_token: required for reads when set
	LogLevel      string               // log_level: trace, debug, info, warn, error
	HideVersion   bool                 // hide_version: version.bind/version.server answer REFUSED
	HideIdentity  bool                 // hide_identity: id.server/hostname.bind answer REFUSED
	RRL           policy.RRL           // rrl: response rate limiting, off by default
	Forwarding    policy.Forwarding    // forwarding: resolve other names for chosen clients
	ClientAnswers policy.ClientAnswers // client_answers: off when its networks are empty
}

// defaultDBPath is db_path's default.
const defaultDBPath = "/data/cns/cns.db"

// defaultServer is what an absent key of the section means.
func defaultServer() Server {
	return Server{DBPath: defaultDBPath, DNSListen: []string{"0.0.0.0:53", "[::]:53"}}
}

// Limits is the section of that name: the store's.
type Limits struct {
	Journal  db.JournalLimits // journal_max_entries, journal_max_bytes, journal_max_age_s
	MaxRRset int              // max_rrset (default 90)
}

// defaultLimits is what an absent key of the section means.
func defaultLimits() Limits {
	return Limits{Journal: db.DefaultJournalLimits, MaxRRset: db.DefaultMaxRRset}
}

func parseDBPath(p *parser) error {
	if err := p.getInto("db_path", &p.c.DBPath); err != nil {
		return err
	}
	if p.c.DBPath == "" {
		return p.bad("db_path", "must not be empty")
	}
	return nil
}

func parseDNSListen(p *parser) error {
	if err := p.getInto("dns_listen", &p.c.DNSListen); err != nil {
		return err
	}
	for i, a := range p.c.DNSListen {
		if _, err := netip.ParseAddrPort(a); err != nil {
			return p.bad(fmt.Sprintf("dns_listen[%d]", i), "%q is not an IP:port address (%v)", a, err)
		}
	}
	return nil
}

func parseAPIServer(p *parser) error {
	var api struct {
		Listen    json.RawMessage `json:"listen"`
		Token     string          `json:"token"`
		ReadToken string          `json:"read_token"`
	}
	ok, err := p.get("api_server", &api)
	if err != nil {
		return err
	}
	p.c.APIToken, p.c.APIReadToken = api.Token, api.ReadToken
	if !ok || len(api.Listen) == 0 || string(api.Listen) == "null" {
		return nil // the reference's listeners (DefaultAPIPort)
	}
	// One address, as the key always took, or a list; [] turns the API off.
	var list []string
	var one string
	if err := json.Unmarshal(api.Listen, &one); err == nil {
		if one != "" {
			list = []string{one}
		}
	} else if err := json.Unmarshal(api.Listen, &list); err != nil {
		return p.bad("api_server.listen", "want an \"ip:port\" string or a list of them, got %s", api.Listen)
	}
	p.c.APIListen = []string{}
	for i, a := range list {
		if _, err := netip.ParseAddrPort(a); err != nil {
			key := "api_server.listen"
			if len(list) > 1 {
				key = fmt.Sprintf("api_server.listen[%d]", i)
			}
			return p.bad(key, "%q is not an IP:port address (%v)", a, err)
		}
		p.c.APIListen = append(p.c.APIListen, a)
	}
	return nil
}

func parseLogLevel(p *parser) error {
	if err := p.getInto("log_level", &p.c.LogLevel); err != nil {
		return err
	}
	if _, err := ParseLogLevel(p.c.LogLevel); err != nil {
		return p.bad("log_level", "%v", err)
	}
	return nil
}

// parseJournal reads the three journal_max_* keys in one decode of the
// file, as before the key table: a type problem is reported under
// journal_max_* and names the field.
func parseJournal(p *parser) error {
	var jn struct {
		Entries *int     `json:"journal_max_entries"`
		Bytes   *int64   `json:"journal_max_bytes"`
		Age     *float64 `json:"journal_max_age_s"`
	}
	if err := json.Unmarshal(p.data, &jn); err != nil {
		return p.bad("journal_max_*", "%s", typeProblem(err))
	}
	j := &p.c.Journal
	if jn.Entries != nil {
		if *jn.Entries < 1 {
			return p.bad("journal_max_entries", "must be at least 1")
		}
		j.MaxEntries = *jn.Entries
	}
	if jn.Bytes != nil {
		if *jn.Bytes < 4096 {
			return p.bad("journal_max_bytes", "must be at least 4096")
		}
		j.MaxBytes = *jn.Bytes
	}
	if jn.Age != nil {
		if *jn.Age <= 0 {
			return p.bad("journal_max_age_s", "must be positive")
		}
		j.MaxAge = time.Duration(*jn.Age * float64(time.Second))
	}
	return nil
}

func parseMaxRRset(p *parser) error {
	if ok, err := p.get("max_rrset", &p.c.MaxRRset); err != nil {
		return err
	} else if ok && (p.c.MaxRRset < 1 || p.c.MaxRRset > 1000) {
		return p.bad("max_rrset", "must be between 1 and 1000")
	}
	return nil
}

func parseRRL(p *parser) error {
	var rrl struct {
		Rate   int      `json:"responses_per_second"`
		Slip   *int     `json:"slip"`
		V4     int      `json:"ipv4_prefix"`
		V6     int      `json:"ipv6_prefix"`
		Exempt []string `json:"exempt"`
	}
	if ok, err := p.get("rrl", &rrl); err != nil || !ok {
		return err
	}
	if rrl.Rate < 0 {
		return p.bad("rrl.responses_per_second", "must not be negative")
	}
	slip := 2 // Knot's and NSD's default
	if rrl.Slip != nil {
		slip = *rrl.Slip
	}
	if slip < 0 || slip > 100 {
		return p.bad("rrl.slip", "must be between 0 and 100")
	}
	if rrl.V4 < 0 || rrl.V4 > 32 {
		return p.bad("rrl.ipv4_prefix", "must be between 1 and 32")
	}
	if rrl.V6 < 0 || rrl.V6 > 128 {
		return p.bad("rrl.ipv6_prefix", "must be between 1 and 128")
	}
	exempt, err := p.prefixes("rrl.exempt", rrl.Exempt)
	if err != nil {
		return err
	}
	p.c.RRL = policy.RRL{ResponsesPerSecond: rrl.Rate, Slip: slip, IPv4Prefix: rrl.V4, IPv6Prefix: rrl.V6, Exempt: exempt}
	return nil
}

func parseForwarding(p *parser) error {
	var fwd struct {
		Clients      []string `json:"clients"`
		Upstreams    []string `json:"upstreams"`
		CacheEntries int      `json:"cache_entries"`
		TimeoutMS    int      `json:"timeout_ms"`
	}
	if ok, err := p.get("forwarding", &fwd); err != nil || !ok {
		return err
	}
	f := &p.c.Forwarding
	var err error
	if f.Clients, err = p.prefixes("forwarding.clients", fwd.Clients); err != nil {
		return err
	}
	if f.Upstreams, err = p.notifyTargets("forwarding.upstreams", fwd.Upstreams); err != nil {
		return err
	}
	if (len(fwd.Clients) == 0) != (len(fwd.Upstreams) == 0) {
		return p.bad("forwarding", "needs both clients and upstreams")
	}
	if fwd.CacheEntries < 0 || fwd.TimeoutMS < 0 {
		return p.bad("forwarding", "cache_entries and timeout_ms must not be negative")
	}
	f.CacheEntries = fwd.CacheEntries
	f.Timeout = time.Duration(fwd.TimeoutMS) * time.Millisecond
	return nil
}

func parseClientAnswers(p *parser) error {
	var ca struct {
		Networks []string `json:"networks"`
		Listen   []string `json:"listen"`
	}
	if ok, err := p.get("client_answers", &ca); err != nil || !ok {
		return err
	}
	if len(ca.Networks) == 0 {
		return p.bad("client_answers.networks", "required: at least one network or pool UUID")
	}
	c := &p.c.ClientAnswers
	for i, n := range ca.Networks {
		if !dc.IsUUID(n) {
			return p.bad(fmt.Sprintf("client_answers.networks[%d]", i), "%q is not a UUID", n)
		}
		c.Networks = append(c.Networks, strings.ToLower(n))
	}
	for i, a := range ca.Listen {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			return p.bad(fmt.Sprintf("client_answers.listen[%d]", i), "%q is not an IP:port address (%v)", a, err)
		}
		c.Listen = append(c.Listen, ap)
	}
	return nil
}
