package serve

import (
	"context"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// A peer's version is asked after a transfer's probe: again after
// versionMaxAge once it answered, and, when it did not answer at all,
// after versionRetryMin, doubling up to versionRetryMax (a peer down for a
// minute is not shown "unknown" for an hour).
const (
	versionMaxAge   = time.Hour
	versionRetryMin = time.Minute
	versionRetryMax = time.Hour
)

// versionDue reports whether the peer's version is to be asked at now.
func (p *Peer) versionDue(now time.Time) bool {
	if p.VersionFailures > 0 {
		return !now.Before(p.VersionTriedAt.Add(backoff(versionRetryMin, versionRetryMax, p.VersionFailures-1)))
	}
	return p.VersionAt.IsZero() || now.Sub(p.VersionAt) >= versionMaxAge
}

// probeVersion asks the peer at to what it runs, as the reference does:
// CHAOS version.server, then version.bind (prefixed "ISC BIND " when it is
// a bare 9.x), then version._cns_meta (another cns or triton-cns, prefixed
// "Triton CNS "). A peer that answers none of them with a version runs ""
// (it does not say); one that answers nothing at all is asked again with
// backoff, keeping the version it last gave.
func (t *peerTracker) probeVersion(ctx context.Context, c *dns.Client, addr netip.Addr, to netip.AddrPort) {
	version, answered := "", false
	for _, q := range []struct {
		name   string
		class  uint16
		prefix func(string) string
	}{
		{"version.server.", dns.ClassCHAOS, func(v string) string { return v }},
		{"version.bind.", dns.ClassCHAOS, func(v string) string {
			if strings.HasPrefix(v, "9.") {
				return "ISC BIND " + v
			}
			return v
		}},
		{"version._cns_meta.", dns.ClassINET, func(v string) string { return "Triton CNS " + v }},
	} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, dns.TypeTXT)
		m.Question[0].Qclass = q.class
		r, _, err := c.ExchangeContext(ctx, m, to.String())
		if err != nil {
			continue
		}
		answered = true
		if len(r.Answer) > 0 {
			if txt, ok := r.Answer[0].(*dns.TXT); ok && len(txt.Txt) > 0 {
				version = q.prefix(strings.Join(txt.Txt, ""))
				break
			}
		}
	}
	if ctx.Err() != nil {
		return
	}
	now := t.s.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[addr]
	if p == nil {
		return
	}
	if answered {
		p.Version, p.VersionAt, p.VersionFailures = version, now, 0
	} else {
		p.VersionFailures++
		p.VersionTriedAt = now
	}
	t.touch(addr)
}
