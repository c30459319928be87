package secondarytest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Signing makes a BIND or Knot secondary sign the zones it transfers, as
// the manual's "Signing with DNSSEC" (docs/replication.md) configures
// them: algorithm 13 (ECDSAP256SHA256), a KSK that never rolls and a ZSK rolled over
// automatically every 30 days, NSEC, or NSEC3 with 0 iterations and no
// salt (RFC 9276). Each server gives the signed zone serials of its own.
type Signing struct {
	NSEC3 bool
}

// bindSources makes BIND send transfers, SOA queries and NOTIFYs from
// its own address when that is not 127.0.0.1.
func bindSources(cfg *Config) string {
	if cfg.Address == "127.0.0.1" {
		return ""
	}
	return fmt.Sprintf("\ttransfer-source %s;\n\tquery-source address %s;\n\tnotify-source %s;\n", cfg.Address, cfg.Address, cfg.Address)
}

// bindPolicy is the dnssec-policy the signed zones use.
func bindPolicy(cfg *Config) string {
	if cfg.Signing == nil {
		return ""
	}
	nsec3 := ""
	if cfg.Signing.NSEC3 {
		nsec3 = "\tnsec3param iterations 0 optout no salt-length 0;\n"
	}
	return `dnssec-policy "cns" {
	keys {
		ksk lifetime unlimited algorithm ecdsap256sha256;
		zsk lifetime P30D algorithm ecdsap256sha256;
	};
` + nsec3 + "};\n"
}

func bindZoneSigning(cfg *Config) string {
	if cfg.Signing == nil {
		return ""
	}
	return "\tinline-signing yes;\n\tdnssec-policy \"cns\";\n"
}

// knotVia makes Knot reach the primary from its own address.
func knotVia(cfg *Config) string {
	if cfg.Address == "127.0.0.1" {
		return ""
	}
	return "    via: " + cfg.Address + "\n"
}

// knotPolicy is the policy section the signed zones use.
func knotPolicy(cfg *Config) string {
	if cfg.Signing == nil {
		return ""
	}
	nsec3 := "    nsec3: off\n"
	if cfg.Signing.NSEC3 {
		nsec3 = "    nsec3: on\n    nsec3-iterations: 0\n    nsec3-salt-length: 0\n"
	}
	return "\npolicy:\n  - id: cns\n    algorithm: ecdsap256sha256\n    ksk-lifetime: 0\n    zsk-lifetime: 30d\n" + nsec3
}

func knotZoneSigning(cfg *Config) string {
	if cfg.Signing == nil {
		return ""
	}
	return "    dnssec-signing: on\n    dnssec-policy: cns\n"
}

// WaitSigned polls the secondary until it serves zone signed (a DNSKEY
// RRset and a signed SOA), or timeout passes, and returns the DNSKEYs.
func (s *Secondary) WaitSigned(zone string, timeout time.Duration) ([]*dns.DNSKEY, error) {
	deadline := time.Now().Add(timeout)
	for {
		if keys, ok := s.signed(zone); ok {
			return keys, nil
		}
		if !s.Running() {
			return nil, fmt.Errorf("%s exited (%v) waiting for %s to be signed\n%s", s.cfg.Kind, s.exitErr(), zone, tail(s.Log(), 40))
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s at %s: %s not signed within %v\n%s", s.cfg.Kind, s.Addr(), zone, timeout, tail(s.Log(), 40))
		}
		time.Sleep(20 * time.Millisecond) // polling observable state
	}
}

func (s *Secondary) signed(zone string) ([]*dns.DNSKEY, bool) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(zone), dns.TypeSOA)
	m.SetEdns0(1232, true)
	c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, s.Addr())
	if err != nil || !hasType(r.Answer, dns.TypeRRSIG) {
		return nil, false
	}
	m.SetQuestion(dns.Fqdn(zone), dns.TypeDNSKEY)
	r, _, err = c.Exchange(m, s.Addr())
	if err != nil {
		return nil, false
	}
	var keys []*dns.DNSKEY
	for _, rr := range r.Answer {
		if k, ok := rr.(*dns.DNSKEY); ok && strings.EqualFold(k.Hdr.Name, dns.Fqdn(zone)) {
			keys = append(keys, k)
		}
	}
	return keys, len(keys) > 0
}

func hasType(rrs []dns.RR, t uint16) bool {
	for _, rr := range rrs {
		if rr.Header().Rrtype == t {
			return true
		}
	}
	return false
}

// VerifyZone checks a signed zone (as Transfer returns it) with
// ldns-verify-zone (Debian ldnsutils), or dnssec-verify (bind9-utils)
// when that is missing: every RRset signed by a key of the zone, the
// NSEC or NSEC3 chain complete. It returns which tool ran, and its
// complaint as the error.
func VerifyZone(dir, zone string, rrs []dns.RR) (string, error) {
	var b strings.Builder
	for _, rr := range rrs {
		b.WriteString(rr.String() + "\n")
	}
	path := filepath.Join(dir, zoneFile(zone)+".signed")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	tool, err := Verifier()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(tool, path)
	if filepath.Base(tool) == "dnssec-verify" {
		cmd = exec.Command(tool, "-o", dns.Fqdn(zone), path)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return filepath.Base(cmd.Path), fmt.Errorf("%s %s: %v\n%s", filepath.Base(cmd.Path), zone, err, tail(string(out), 20))
	}
	return filepath.Base(cmd.Path), nil
}

// ErrNoVerifier is VerifyZone's error when no verifier is installed.
var ErrNoVerifier = errors.New("no zone verifier")

// Verifier returns the zone verifier VerifyZone runs: ldns-verify-zone,
// else dnssec-verify; or an error naming the Debian packages that provide
// them.
func Verifier() (string, error) {
	for _, p := range []string{"/usr/bin/ldns-verify-zone", "/usr/bin/dnssec-verify"} {
		if fileExists(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: neither ldns-verify-zone (apt-get install ldnsutils) nor dnssec-verify (apt-get install bind9-utils) is installed", ErrNoVerifier)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// WaitVerified transfers zone from the secondary until it verifies
// (VerifyZone) or timeout passes: BIND signs a new zone in chunks, a few
// names at a time, so a zone can be served before it is fully signed.
// It returns the verified zone and the tool that checked it.
func (s *Secondary) WaitVerified(dir, zone string, timeout time.Duration) ([]dns.RR, string, error) {
	deadline := time.Now().Add(timeout)
	for {
		rrs, err := s.Transfer(zone)
		if err == nil {
			var tool string
			if tool, err = VerifyZone(dir, zone, rrs); err == nil || errors.Is(err, ErrNoVerifier) {
				return rrs, tool, err
			}
		}
		if time.Now().After(deadline) {
			return nil, "", err
		}
		time.Sleep(100 * time.Millisecond) // polling observable state
	}
}

// Resign makes a Knot secondary sign zone again now (knotc zone-sign), as
// its signature refresh or a key rollover would: Knot keeps the primary's
// serial when it signs a transfer, and increments it when it signs on its
// own. BIND (rndc is off) is not supported.
func (s *Secondary) Resign(zone string) error {
	if s.cfg.Kind != Knot {
		return fmt.Errorf("secondarytest: Resign is for Knot")
	}
	s.mu.Lock()
	sock := filepath.Join(filepath.Dir(s.log), "knot.sock")
	s.mu.Unlock()
	out, err := exec.Command("/usr/sbin/knotc", "-s", sock, "zone-sign", dns.Fqdn(zone)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("knotc zone-sign %s: %v\n%s", zone, err, out)
	}
	return nil
}
