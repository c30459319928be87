package aggregate

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

// transfer is what one zone transfer from a source said: either the whole
// zone (full) or a sequence of differences from the serial asked for.
type transfer struct {
	soa   *dns.SOA // the source's current SOA
	full  bool
	zone  names  // full: every record but the SOA, encoded as it came
	diffs []diff // incremental, oldest first
	n     int    // records received
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
	col := &collector{c: c, serial: serial, ixfr: have, zone: names{}}
	var failed error
	for env := range ch {
		if env.Error != nil && failed == nil {
			failed = env.Error
		}
		for _, rr := range env.RR {
			if failed == nil {
				failed = col.add(rr)
			}
		}
	}
	if failed != nil {
		return nil, failed
	}
	return col.finish()
}

// parse checks a transfer's records (see collector).
func (c *client) parse(rrs []dns.RR, serial uint32, ixfr bool) (*transfer, error) {
	col := &collector{c: c, serial: serial, ixfr: ixfr, zone: names{}}
	for _, rr := range rrs {
		if err := col.add(rr); err != nil {
			return nil, err
		}
	}
	return col.finish()
}

// collector checks a transfer's records as they arrive (RFC 1995 §4, RFC
// 5936 §2.2) and keeps a full transfer encoded, not as a million
// dns.RRs: anything malformed rejects the whole transfer.
type collector struct {
	c           *client
	serial      uint32 // the serial an IXFR asked from
	ixfr        bool
	first       *dns.SOA
	n           int
	incremental bool     // an IXFR answered with difference sequences
	rrs         []dns.RR // incremental: every record after the first
	ended       bool     // full: the closing SOA came
	zone        names    // full: the records
}

func (a *collector) add(rr dns.RR) error {
	a.n++
	if a.n > a.c.maxRRs {
		return fmt.Errorf("transfer larger than %d records", a.c.maxRRs)
	}
	h := rr.Header()
	if h.Class != dns.ClassINET {
		return fmt.Errorf("record %s: class %s", h.Name, dns.ClassToString[h.Class])
	}
	if !dns.IsSubDomain(a.c.zone, h.Name) {
		return fmt.Errorf("record %s is outside the zone", h.Name)
	}
	soa, isSOA := rr.(*dns.SOA)
	if a.n == 1 {
		if !isSOA || !strings.EqualFold(h.Name, a.c.zone) {
			return errors.New("transfer does not start with the zone's SOA")
		}
		a.first = soa
		return nil
	}
	if a.n == 2 && a.ixfr && isSOA && soa.Serial != a.first.Serial {
		a.incremental = true
	}
	if a.incremental {
		a.rrs = append(a.rrs, rr)
		return nil
	}
	if a.ended {
		return errors.New("records after the closing SOA")
	}
	if isSOA {
		if soa.Serial != a.first.Serial || !strings.EqualFold(h.Name, a.c.zone) {
			return errors.New("full transfer has a SOA in its middle")
		}
		a.ended = true
		return nil
	}
	return a.zone.add(rr)
}

func (a *collector) finish() (*transfer, error) {
	switch a.n {
	case 0:
		return nil, errors.New("empty transfer")
	case 1:
		if a.ixfr && !db.SerialLess(a.serial, a.first.Serial) {
			return nil, errUpToDate
		}
		return nil, errors.New("transfer has only its SOA")
	}
	t := &transfer{soa: a.first, n: a.n}
	if !a.incremental {
		if !a.ended {
			return nil, errors.New("transfer does not end with the zone's SOA")
		}
		t.full, t.zone = true, a.zone
		return t, nil
	}
	last, ok := a.rrs[len(a.rrs)-1].(*dns.SOA)
	if !ok || last.Serial != a.first.Serial {
		return nil, errors.New("transfer does not end with the zone's SOA")
	}
	return t, t.parseDiffs(a.rrs[:len(a.rrs)-1], a.serial)
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
