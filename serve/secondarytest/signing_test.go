package secondarytest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Ensure BIND and Knot, configured by Signing, sign what they transfer
// (NSEC and NSEC3), re-sign after an IXFR under serials of their own, and
// serve a zone that verifies and that Unbound, anchored on their keys,
// validates (AD on an answer, a validated NXDOMAIN).
func TestSigningSecondary(t *testing.T) {
	for i, c := range []struct {
		kind  Kind
		nsec3 bool
	}{{Knot, false}, {BIND, true}, {Knot, true}, {BIND, false}} {
		t.Run(fmt.Sprintf("%s/nsec3=%v", c.kind, c.nsec3), func(t *testing.T) {
			if _, err := Verifier(); err != nil {
				t.Skip(err)
			}
			p := newToyPrimary(t, nil)
			p.addZone(testZone, 100, 20)
			// BIND listens only on an interface's address: 127.0.0.1 on
			// a stock lo. Knot binds any loopback address.
			addr := "127.0.0.1"
			if c.kind == Knot {
				addr = fmt.Sprintf("127.0.0.%d", 2+i)
			}
			s := Start(t, Config{Kind: c.kind, Primary: p.addr, Zones: []string{testZone}, Dir: t.TempDir(), Address: addr, Signing: &Signing{NSEC3: c.nsec3}})
			if !strings.HasPrefix(s.Addr(), addr+":") {
				t.Fatalf("listens on %s, want %s", s.Addr(), addr)
			}
			keys, err := s.WaitSigned(testZone, 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			serial := p.bump(testZone)
			if rcode, err := p.notify(testZone, s.Addr()); err != nil || rcode != dns.RcodeSuccess {
				t.Fatalf("notify: rcode %d, %v", rcode, err)
			}
			name := fmt.Sprintf("new-%d.%s", serial, testZone)
			waitFor(t, 20*time.Second, name+" signed", func() bool {
				r, err := s.Query(name, dns.TypeA)
				return err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1
			})
			own, _ := s.Serial(testZone)
			t.Logf("%s serves serial %d as %d", c.kind, serial, own)
			rrs, tool, err := s.WaitVerified(t.TempDir(), testZone, 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d records verify", tool, len(rrs))
			denial := dns.TypeNSEC
			if c.nsec3 {
				denial = dns.TypeNSEC3
			}
			if !hasType(rrs, denial) || !hasType(rrs, dns.TypeRRSIG) {
				t.Fatalf("signed zone has no %s or RRSIG", dns.TypeToString[denial])
			}

			v := StartValidator(t, t.TempDir(), map[string]ValidatorZone{testZone: {Server: s.Addr(), Anchors: keys}})
			r, err := v.Query(name, dns.TypeA)
			if err != nil || r.Rcode != dns.RcodeSuccess || !r.AuthenticatedData || len(r.Answer) == 0 {
				t.Errorf("%s A through unbound: want a validated answer, got %v %v", name, r, err)
			}
			r, err = v.Query("absent."+testZone, dns.TypeA)
			if err != nil || r.Rcode != dns.RcodeNameError || !r.AuthenticatedData {
				t.Errorf("absent name through unbound: want a validated NXDOMAIN, got %v %v", r, err)
			}
			// Outside the stub there is nothing to ask: its only root
			// server is 127.0.0.254, where nothing listens (asked once:
			// the answer is a timeout).
			if i > 0 {
				return
			}
			if r, err := v.Query("www.example.org", dns.TypeA); err == nil && r.Rcode != dns.RcodeServerFailure {
				t.Errorf("a name outside the stub zones resolved: %v", r)
			}
		})
	}
}
