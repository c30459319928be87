package aggregate

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// transfer is what one zone transfer from a source said: either the whole
// zone (full) or a sequence of differences from the serial asked for.
type transfer struct {
	soa   *dns.SOA // the source's current SOA
	full  bool
	rrs   []dns.RR // full: every record but the SOA
	diffs []diff   // incremental, oldest first
	n     int      // records received
}

// diff is one IXFR difference sequence (RFC 1995 §4).
type diff struct {
	from, to uint32
	del, add []dns.RR
}

// errUpToDate means the source is at the serial asked for.
var errUpToDate = errors.New("up to date")

// client asks one source's primaries.
type client struct {
	zone    string // fqdn, lower case
	key     *Key
	timeout time.Duration
	maxRRs  int
}

func (c *client) sign(m *dns.Msg) {
	if c.key != nil {
		m.SetTsig(c.key.Name, c.key.Algorithm, 300, time.Now().Unix())
	}
}

func (c *client) secrets() map[string]string {
	if c.key == nil {
		return nil
	}
	return map[string]string{c.key.Name: c.key.Secret}
}

// soa asks primary for the zone's SOA (UDP, then TCP when truncated).
func (c *client) soa(primary string) (*dns.SOA, error) {
	m := new(dns.Msg)
	m.SetQuestion(c.zone, dns.TypeSOA)
	c.sign(m)
	cl := &dns.Client{Timeout: c.timeout, TsigSecret: c.secrets()}
	r, _, err := cl.Exchange(m, primary)
	if err == nil && r.Truncated {
		cl.Net = "tcp"
		r, _, err = cl.Exchange(m, primary)
	}
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("SOA query: %s", dns.RcodeToString[r.Rcode])
	}
	for _, rr := range r.Answer {
		if s, ok := rr.(*dns.SOA); ok && strings.EqualFold(s.Hdr.Name, c.zone) {
			return s, nil
		}
	}
	return nil, errors.New("SOA query: no SOA in the answer")
}

// fetch transfers the zone from primary: IXFR from serial when have is
// set (the source may still answer with the whole zone), else AXFR.
func (c *client) fetch(primary string, serial uint32, have bool) (*transfer, error) {
	m := new(dns.Msg)
	if have {
		m.SetIxfr(c.zone, serial, ".", ".")
	} else {
		m.SetAxfr(c.zone)
	}
	c.sign(m)
	tr := &dns.Transfer{DialTimeout: c.timeout, ReadTimeout: c.timeout, TsigSecret: c.secrets()}
	ch, err := tr.In(m, primary)
	if err != nil {
		return nil, err
	}
	var rrs []dns.RR
	var failed error
	for env := range ch {
		if env.Error != nil && failed == nil {
			failed = env.Error
		}
		if failed == nil {
			rrs = append(rrs, env.RR...)
			if len(rrs) > c.maxRRs {
				failed = fmt.Errorf("transfer larger than %d records", c.maxRRs)
			}
		}
	}
	if failed != nil {
		return nil, failed
	}
	return c.parse(rrs, serial, have)
}

// parse checks a transfer's records and splits them (RFC 1995 §4, RFC
// 5936 §2.2): anything malformed rejects the whole transfer.
func (c *client) parse(rrs []dns.RR, serial uint32, ixfr bool) (*transfer, error) {
	if len(rrs) == 0 {
		return nil, errors.New("empty transfer")
	}
	first, ok := rrs[0].(*dns.SOA)
	if !ok || !strings.EqualFold(first.Hdr.Name, c.zone) {
		return nil, errors.New("transfer does not start with the zone's SOA")
	}
	for _, rr := range rrs {
		if rr.Header().Class != dns.ClassINET {
			return nil, fmt.Errorf("record %s: class %s", rr.Header().Name, dns.ClassToString[rr.Header().Class])
		}
		if !dns.IsSubDomain(c.zone, rr.Header().Name) {
			return nil, fmt.Errorf("record %s is outside the zone", rr.Header().Name)
		}
	}
	t := &transfer{soa: first, n: len(rrs)}
	if len(rrs) == 1 {
		if ixfr && !newer(first.Serial, serial) {
			return nil, errUpToDate
		}
		return nil, errors.New("transfer has only its SOA")
	}
	last, ok := rrs[len(rrs)-1].(*dns.SOA)
	if !ok || last.Serial != first.Serial {
		return nil, errors.New("transfer does not end with the zone's SOA")
	}
	if second, ok := rrs[1].(*dns.SOA); ixfr && ok && len(rrs) > 2 && second.Serial != first.Serial {
		return t, t.parseDiffs(rrs[1:len(rrs)-1], serial)
	}
	// AXFR (or an IXFR answered with the whole zone).
	t.full = true
	for _, rr := range rrs[1 : len(rrs)-1] {
		if rr.Header().Rrtype == dns.TypeSOA {
			return nil, errors.New("full transfer has a SOA in its middle")
		}
		t.rrs = append(t.rrs, rr)
	}
	return t, nil
}

// parseDiffs reads SOA(old) deletions SOA(new) additions ... and checks
// that the sequences chain from serial to the source's current one.
func (t *transfer) parseDiffs(rrs []dns.RR, serial uint32) error {
	at := serial
	for len(rrs) > 0 {
		old, ok := rrs[0].(*dns.SOA)
		if !ok || old.Serial != at {
			return fmt.Errorf("IXFR difference sequence does not start at serial %d", at)
		}
		d := diff{from: old.Serial}
		i := 1
		for ; i < len(rrs) && rrs[i].Header().Rrtype != dns.TypeSOA; i++ {
			d.del = append(d.del, rrs[i])
		}
		if i == len(rrs) {
			return errors.New("IXFR difference sequence without its new SOA")
		}
		nw := rrs[i].(*dns.SOA)
		d.to = nw.Serial
		i++
		for ; i < len(rrs) && rrs[i].Header().Rrtype != dns.TypeSOA; i++ {
			d.add = append(d.add, rrs[i])
		}
		t.diffs = append(t.diffs, d)
		at = d.to
		rrs = rrs[i:]
	}
	if at != t.soa.Serial {
		return fmt.Errorf("IXFR ends at serial %d, the source is at %d", at, t.soa.Serial)
	}
	return nil
}

// newer reports whether a is after b in RFC 1982 arithmetic.
func newer(a, b uint32) bool { return a != b && int32(a-b) > 0 }
