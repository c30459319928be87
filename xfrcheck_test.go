package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Zone transfers read the way a secondary reads them, for the crash and
// reliability tests: an AXFR gives a zone's content at one serial, an IXFR
// is applied to an earlier content and must give the current one.

// longRun reports whether the long reliability runs are asked for
// (CNS_LONG=1, see RELIABILITY.md).
func longRun() bool { return os.Getenv("CNS_LONG") != "" }

// zoneContent is a zone at one serial: every record but the SOA, in
// presentation form.
type zoneContent map[string]bool

func rrText(rr dns.RR) string { return strings.ReplaceAll(rr.String(), "\t", " ") }

// transferIn runs one AXFR or IXFR over TCP and returns every record.
func transferIn(addr string, m *dns.Msg) ([]dns.RR, error) {
	tr := &dns.Transfer{DialTimeout: 2 * time.Second, ReadTimeout: 10 * time.Second}
	ch, err := tr.In(m, addr)
	if err != nil {
		return nil, err
	}
	var rrs []dns.RR
	for env := range ch {
		if env.Error != nil {
			return nil, env.Error
		}
		rrs = append(rrs, env.RR...)
	}
	return rrs, nil
}

// axfrContent transfers zone and returns its serial and content.
func axfrContent(addr, zone string) (uint32, zoneContent, error) {
	m := new(dns.Msg)
	m.SetAxfr(dns.Fqdn(zone))
	rrs, err := transferIn(addr, m)
	if err != nil {
		return 0, nil, err
	}
	if len(rrs) < 2 {
		return 0, nil, fmt.Errorf("AXFR of %s: %d records", zone, len(rrs))
	}
	first, ok1 := rrs[0].(*dns.SOA)
	last, ok2 := rrs[len(rrs)-1].(*dns.SOA)
	if !ok1 || !ok2 || first.Serial != last.Serial {
		return 0, nil, fmt.Errorf("AXFR of %s does not start and end with one SOA", zone)
	}
	c := zoneContent{}
	for _, rr := range rrs[1 : len(rrs)-1] {
		if rr.Header().Rrtype == dns.TypeSOA {
			return 0, nil, fmt.Errorf("AXFR of %s has an SOA inside", zone)
		}
		c[rrText(rr)] = true
	}
	return first.Serial, c, nil
}

// ixfrResult is what an IXFR from one serial gave.
type ixfrResult struct {
	to        uint32
	full      bool // the server answered with the whole zone (RFC 1995 §4)
	upToDate  bool // the single SOA
	sequences [][2][]string
}

// ixfrFrom asks for the difference from serial and checks its shape:
// SOA(new), then difference sequences that chain from serial to new, and
// SOA(new); or the whole zone; or a single SOA.
func ixfrFrom(addr, zone string, serial uint32, soa *dns.SOA) (ixfrResult, []dns.RR, error) {
	m := new(dns.Msg)
	m.SetIxfr(dns.Fqdn(zone), serial, soa.Ns, soa.Mbox)
	rrs, err := transferIn(addr, m)
	if err != nil {
		return ixfrResult{}, nil, err
	}
	var res ixfrResult
	if len(rrs) == 0 {
		return res, nil, fmt.Errorf("IXFR from %d: empty", serial)
	}
	head, ok := rrs[0].(*dns.SOA)
	if !ok {
		return res, nil, fmt.Errorf("IXFR from %d: first record is %s", serial, rrText(rrs[0]))
	}
	res.to = head.Serial
	if len(rrs) == 1 {
		res.upToDate = true
		return res, rrs, nil
	}
	if _, ok := rrs[1].(*dns.SOA); !ok {
		res.full = true
		return res, rrs, nil
	}
	if tail, ok := rrs[len(rrs)-1].(*dns.SOA); !ok || tail.Serial != head.Serial {
		return res, nil, fmt.Errorf("IXFR from %d does not end with SOA %d", serial, head.Serial)
	}
	at := serial
	i := 1
	for i < len(rrs)-1 {
		from, ok := rrs[i].(*dns.SOA)
		if !ok || from.Serial != at {
			return res, nil, fmt.Errorf("IXFR from %d: sequence %d starts with %s, want SOA %d", serial, len(res.sequences), rrText(rrs[i]), at)
		}
		var seq [2][]string
		for i++; i < len(rrs)-1 && rrs[i].Header().Rrtype != dns.TypeSOA; i++ {
			seq[0] = append(seq[0], rrText(rrs[i]))
		}
		to, ok := rrs[i].(*dns.SOA)
		if !ok || i == len(rrs)-1 {
			return res, nil, fmt.Errorf("IXFR from %d: sequence %d has no SOA(to)", serial, len(res.sequences))
		}
		for i++; i < len(rrs)-1 && rrs[i].Header().Rrtype != dns.TypeSOA; i++ {
			seq[1] = append(seq[1], rrText(rrs[i]))
		}
		if !dnsSerialLess(at, to.Serial) {
			return res, nil, fmt.Errorf("IXFR from %d: sequence %d goes from %d to %d", serial, len(res.sequences), at, to.Serial)
		}
		at = to.Serial
		res.sequences = append(res.sequences, seq)
	}
	if at != head.Serial {
		return res, nil, fmt.Errorf("IXFR from %d ends at %d, not %d", serial, at, head.Serial)
	}
	return res, rrs, nil
}

func dnsSerialLess(a, b uint32) bool { return a != b && b-a < 1<<31 }

// apply plays the difference sequences forward on c: every deleted
// record must be there and every added one absent.
func (r ixfrResult) apply(c zoneContent) (zoneContent, error) {
	out := maps.Clone(c)
	for n, seq := range r.sequences {
		for _, d := range seq[0] {
			if !out[d] {
				return nil, fmt.Errorf("sequence %d deletes %s, which is not there", n, d)
			}
			delete(out, d)
		}
		for _, a := range seq[1] {
			if out[a] {
				return nil, fmt.Errorf("sequence %d adds %s, which is there", n, a)
			}
			out[a] = true
		}
	}
	return out, nil
}

// undo plays the sequences backwards from the current content c, giving
// the content at the IXFR's starting serial.
func (r ixfrResult) undo(c zoneContent) (zoneContent, error) {
	out := maps.Clone(c)
	for n := len(r.sequences) - 1; n >= 0; n-- {
		seq := r.sequences[n]
		for _, a := range seq[1] {
			if !out[a] {
				return nil, fmt.Errorf("sequence %d added %s, which is not there to undo", n, a)
			}
			delete(out, a)
		}
		for _, d := range seq[0] {
			if out[d] {
				return nil, fmt.Errorf("sequence %d deleted %s, which is there", n, d)
			}
			out[d] = true
		}
	}
	return out, nil
}

// diffContent describes how got differs from want (at most a few lines).
func diffContent(got, want zoneContent) string {
	var b strings.Builder
	n := 0
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if !got[k] && n < 5 {
			fmt.Fprintf(&b, "\n  missing %s", k)
			n++
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if !want[k] && n < 10 {
			fmt.Fprintf(&b, "\n  extra   %s", k)
			n++
		}
	}
	return b.String()
}
