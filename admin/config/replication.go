package config

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/aggregate"
	"github.com/tritondatacenter/cns/serve/policy"
)

// Replication is the section of that name: who may transfer, whom to
// NOTIFY, TSIG, how serials are followed to the secondaries, and the
// zones of other cns an aggregator follows (aggregate.go).
type Replication struct {
	AllowTransfer []netip.Prefix
	// MinNotifyInterval spaces NOTIFYs to one peer (reference default 5 s).
	MinNotifyInterval time.Duration
	AlsoNotify        []netip.AddrPort   // also_notify, every zone
	Signers           []netip.Addr       // signers: DNSSEC-signing secondaries
	TSIGKeys          []policy.Key       // tsig_keys
	PeerKeys          map[string]string  // peer_keys: peer name or address → key name
	Propagation       policy.Propagation // propagation: how serials are followed to the secondaries
	Aggregate         []aggregate.Region // aggregate: region zones made of other cns zones (RFD 172)
}

// defaultReplication is what an absent key of the section means.
func defaultReplication() Replication {
	return Replication{MinNotifyInterval: 500 * time.Millisecond}
}

func parseAllowTransfer(p *parser) error {
	var allow []string
	if err := p.getInto("allow_transfer", &allow); err != nil {
		return err
	}
	var err error
	p.c.AllowTransfer, err = p.prefixes("allow_transfer", allow)
	return err
}

func parseAlsoNotify(p *parser) error {
	var notify []string
	if err := p.getInto("also_notify", &notify); err != nil {
		return err
	}
	var err error
	p.c.AlsoNotify, err = p.notifyTargets("also_notify", notify)
	return err
}

// parseSigners reads signers: peer addresses (what they transfer from),
// not names, as cns matches them against transfer sources.
func parseSigners(p *parser) error {
	var list []string
	if err := p.getInto("signers", &list); err != nil {
		return err
	}
	p.c.Signers = nil
	for i, s := range list {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return p.bad(fmt.Sprintf("signers[%d]", i), "%q is not an IP address", s)
		}
		p.c.Signers = append(p.c.Signers, a.Unmap())
	}
	return nil
}

func parseTSIGKeys(p *parser) error {
	var keys map[string]struct {
		Algorithm string `json:"algorithm"`
		Secret    string `json:"secret"`
	}
	if err := p.getInto("tsig_keys", &keys); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		k := keys[name]
		key := fmt.Sprintf("tsig_keys[%q]", name)
		if _, ok := dns.IsDomainName(name); !ok || name == "" {
			return p.bad(key, "%q is not a valid key name", name)
		}
		switch strings.ToLower(k.Algorithm) {
		case "", "hmac-sha256", "hmac-sha1", "hmac-sha224", "hmac-sha384", "hmac-sha512":
		default:
			return p.bad(key+".algorithm", "%q is not supported (hmac-sha256, hmac-sha1, hmac-sha224, hmac-sha384, hmac-sha512)", k.Algorithm)
		}
		if b, err := base64.StdEncoding.DecodeString(k.Secret); err != nil || len(b) == 0 {
			return p.bad(key+".secret", "must be a non-empty base64 string")
		}
		p.c.TSIGKeys = append(p.c.TSIGKeys, policy.Key{Name: name, Algorithm: k.Algorithm, Secret: k.Secret})
	}
	return nil
}

// parsePeerKeys runs after tsig_keys: every key it names must be there.
func parsePeerKeys(p *parser) error {
	c := p.c
	if err := p.getInto("peer_keys", &c.PeerKeys); err != nil {
		return err
	}
	for peer, key := range c.PeerKeys {
		if !slices.ContainsFunc(c.TSIGKeys, func(k policy.Key) bool { return k.Name == key }) {
			return p.bad(fmt.Sprintf("peer_keys[%q]", peer), "key %q is not in tsig_keys", key)
		}
	}
	return nil
}

func parsePropagation(p *parser) error {
	var prop struct {
		Threshold   *int     `json:"threshold_percent"`
		Delay       *float64 `json:"poll_delay_ms"`
		Interval    *float64 `json:"poll_interval_ms"`
		Timeout     *float64 `json:"poll_timeout_ms"`
		Retries     *int     `json:"poll_max_retries"`
		SyncSeconds *float64 `json:"periodic_sync_interval_s"`
	}
	if ok, err := p.get("propagation", &prop); err != nil || !ok {
		return err
	}
	c := &p.c.Propagation
	if prop.Threshold != nil {
		if *prop.Threshold < 1 || *prop.Threshold > 100 {
			return p.bad("propagation.threshold_percent", "must be between 1 and 100")
		}
		c.ThresholdPercent = *prop.Threshold
	}
	for key, v := range map[string]*float64{"poll_delay_ms": prop.Delay, "poll_interval_ms": prop.Interval, "poll_timeout_ms": prop.Timeout, "periodic_sync_interval_s": prop.SyncSeconds} {
		if v != nil && *v <= 0 {
			return p.bad("propagation."+key, "must be positive")
		}
	}
	ms := func(v *float64) time.Duration {
		if v == nil {
			return 0
		}
		return time.Duration(*v * float64(time.Millisecond))
	}
	c.PollDelay, c.PollInterval, c.PollTimeout = ms(prop.Delay), ms(prop.Interval), ms(prop.Timeout)
	if prop.SyncSeconds != nil {
		c.PeriodicSync = time.Duration(*prop.SyncSeconds * float64(time.Second))
	}
	if prop.Retries != nil {
		if *prop.Retries < 1 {
			return p.bad("propagation.poll_max_retries", "must be at least 1")
		}
		c.PollMaxRetries = *prop.Retries
	}
	return nil
}
