package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"
)

var (
	hostnameRE   = regexp.MustCompile(`^[a-zA-Z0-9_]([a-zA-Z0-9_-]{0,62})?(\.[a-zA-Z0-9_]([a-zA-Z0-9_-]{0,62})?)*\.?$`)
	hostmasterRE = regexp.MustCompile(`^[^@.]+@[^@]+$`)
)

// parser is one Parse: the file's name for errors, its top-level keys and
// the Config the keys' parse functions fill in.
type parser struct {
	file string
	data []byte
	top  map[string]json.RawMessage
	c    *Config
}

// Parse validates the JSON of a config file; name is used in errors. Keys
// are parsed in the order of Keys, so the first problem reported is the
// same whatever the file's order.
func Parse(data []byte, name string) (*Config, error) {
	p := &parser{file: name, data: data}
	if err := json.Unmarshal(data, &p.top); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := 1 + bytes.Count(data[:se.Offset], []byte("\n"))
			return nil, p.bad("", "invalid JSON at line %d: %v", line, err)
		}
		return nil, p.bad("", "invalid JSON: %v", err)
	}
	p.c = &Config{Path: name, Zones: defaultZones(), Replication: defaultReplication(), Feeds: defaultFeeds(),
		Server: defaultServer(), Limits: defaultLimits()}
	for _, k := range Keys {
		if k.parse == nil {
			continue
		}
		if err := k.parse(p); err != nil {
			return nil, err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.top)) {
		if _, ok := keyIndex[k]; !ok {
			p.c.Warnings = append(p.c.Warnings, fmt.Sprintf("config %s: unknown key %q ignored", name, k))
		}
	}
	return p.c, nil
}

// bad is a problem with key (or with the file, when key is empty).
func (p *parser) bad(key, format string, args ...any) error {
	return &Error{File: p.file, Key: key, Problem: fmt.Sprintf(format, args...)}
}

// get decodes key into v and reports whether it was present (null is
// absent).
func (p *parser) get(key string, v any) (bool, error) {
	raw, ok := p.top[key]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, p.bad(key, "%s", typeProblem(err))
	}
	return true, nil
}

// getInto is get for a key whose only check is its JSON type.
func (p *parser) getInto(key string, v any) error {
	_, err := p.get(key, v)
	return err
}

// millis reads a key in milliseconds (a JSON number) into dst; a value
// below min is refused with tooSmall.
func (p *parser) millis(key string, dst *time.Duration, min float64, tooSmall string) error {
	var ms float64
	if ok, err := p.get(key, &ms); err != nil || !ok {
		return err
	}
	if ms < min {
		return p.bad(key, "%s", tooSmall)
	}
	*dst = time.Duration(ms * float64(time.Millisecond))
	return nil
}

// prefixes reads a list of addresses and CIDR prefixes; key names the
// list in errors.
func (p *parser) prefixes(key string, list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, s := range list {
		pfx, err := parseAddrOrPrefix(s)
		if err != nil {
			return nil, p.bad(fmt.Sprintf("%s[%d]", key, i), "%q is neither an IP address nor a CIDR prefix", s)
		}
		out = append(out, pfx)
	}
	return out, nil
}

// notifyTargets accepts "ip", "ip:port" and "[ipv6]:port" (port 53 by
// default).
func (p *parser) notifyTargets(key string, list []string) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for i, s := range list {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.AddrPortFrom(a, 53))
			continue
		}
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return nil, p.bad(fmt.Sprintf("%s[%d]", key, i), "%q is neither an IP address nor ip:port", s)
		}
		out = append(out, ap)
	}
	return out, nil
}

// checkPeers checks a zone's peers: names or addresses, and at least one
// when the zone is hidden-primary.
func (p *parser) checkPeers(key string, peers []string, hidden bool) error {
	for i, peer := range peers {
		if !hostnameRE.MatchString(peer) {
			if _, err := netip.ParseAddr(peer); err != nil {
				return p.bad(fmt.Sprintf("%s.peers[%d]", key, i), "%q is neither a host name nor an IP address", peer)
			}
		}
	}
	if hidden && len(peers) == 0 {
		return p.bad(key+".hidden_primary", "needs at least one peer: the first peer becomes the SOA primary")
	}
	return nil
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
