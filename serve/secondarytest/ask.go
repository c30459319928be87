package secondarytest

// Asking a running secondary what it serves: its serial, a transfer of a
// zone, one question.

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

// Serial returns the SOA serial the secondary serves for zone, and false
// when it does not serve the zone (yet).
//
// Knot does not answer queries for a catalog zone it interprets (REFUSED
// with EDE 20) but transfers it, so for Config.Catalog on Knot Serial
// reads the SOA from an AXFR.
func (s *Secondary) Serial(zone string) (uint32, bool) {
	if s.cfg.Kind == Knot && s.cfg.Catalog != "" && strings.EqualFold(strings.TrimSuffix(zone, "."), s.cfg.Catalog) {
		rrs, err := s.Transfer(zone)
		if err != nil || len(rrs) == 0 {
			return 0, false
		}
		if soa, ok := rrs[0].(*dns.SOA); ok {
			return soa.Serial, true
		}
		return 0, false
	}
	r, err := s.Query(zone, dns.TypeSOA)
	if err != nil || r.Rcode != dns.RcodeSuccess || !r.Authoritative {
		return 0, false
	}
	for _, rr := range r.Answer {
		if soa, ok := rr.(*dns.SOA); ok && strings.EqualFold(soa.Hdr.Name, dns.Fqdn(zone)) {
			return soa.Serial, true
		}
	}
	return 0, false
}

// WaitSerial polls the secondary until it serves zone with a serial at or
// after serial (RFC 1982), or timeout passes. The error says what it last
// served and carries the end of its log.
//
// NSD loads what it received in a new server process; the one of before
// answers from the old data until it quits, so for NSD WaitSerial also
// waits until the reload is over (reloaded).
func (s *Secondary) WaitSerial(zone string, serial uint32, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var got uint32
	var have bool
	for {
		got, have = s.Serial(zone)
		if have && SerialGE(got, serial) && s.reloaded() {
			return nil
		}
		if !s.Running() {
			return fmt.Errorf("%s exited (%v) waiting for %s serial %d\n%s", s.cfg.Kind, s.exitErr(), zone, serial, tail(s.Log(), 40))
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling observable state
	}
	state := "does not serve the zone"
	if have {
		state = fmt.Sprintf("serves serial %d", got)
	}
	return fmt.Errorf("%s at %s: waited %v for %s serial >= %d, %s\n%s", s.cfg.Kind, s.Addr(), timeout, zone, serial, state, tail(s.Log(), 40))
}

// reloaded reports whether the secondary has no reload under way: for
// NSD, its group holds its main process, xfrd and its one server process
// (server-count: 1) and nothing else, such as the reload process or the
// server process it replaces, which may still answer from the data of
// before (seen once in ten runs of TestMigrationFromReferenceSerial under
// load: SERVFAIL for a name of the zone just transferred, from the server
// process that predates it). A count caught while a process forks or
// exits is off, and is read again. The others load in place.
func (s *Secondary) reloaded() bool {
	if s.cfg.Kind != NSD {
		return true
	}
	n := groupSize(s.pid())
	return n < 0 || n == 3
}

// SerialGE reports whether a >= b in RFC 1982 serial arithmetic.
func SerialGE(a, b uint32) bool { return a == b || db.SerialLess(b, a) }

// Transfer reads zone from the secondary by AXFR over TCP. The records come
// in transfer order with the SOA first and the closing SOA dropped.
//
// A transfer reset before its first record is asked again, a few times:
// right after NSD commits a zone it received, it reloads, and its server
// processes of before the reload quit; a connection one of them accepted
// meanwhile is reset (seen once in a full -race run: WaitSerial had the
// new serial from a new process over UDP, the AXFR reached an old one).
func (s *Secondary) Transfer(zone string) ([]dns.RR, error) {
	for try := 1; ; try++ {
		rrs, err := s.transfer(zone)
		if err == nil {
			return rrs, nil
		}
		if len(rrs) > 0 || !errors.Is(err, syscall.ECONNRESET) || try == 5 {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond) // the reload has no signal outside the secondary's log
	}
}

// transfer is one AXFR; on an error, rrs are the records read before it.
func (s *Secondary) transfer(zone string) (rrs []dns.RR, err error) {
	m := new(dns.Msg)
	m.SetAxfr(dns.Fqdn(zone))
	tr := &dns.Transfer{DialTimeout: 2 * time.Second, ReadTimeout: 10 * time.Second}
	ch, err := tr.In(m, s.Addr())
	if err != nil {
		return nil, fmt.Errorf("axfr %s from %s: %w", zone, s.cfg.Kind, err)
	}
	if rrs, err = Records(ch); err != nil {
		return rrs, fmt.Errorf("axfr %s from %s: %w", zone, s.cfg.Kind, err)
	}
	if n := len(rrs); n >= 2 && rrs[n-1].Header().Rrtype == dns.TypeSOA {
		rrs = rrs[:n-1]
	}
	return rrs, nil
}

// Records reads a transfer's messages (dns.Transfer.In) to the end: every
// record, in order, and the first error, with the records read before it.
func Records(ch chan *dns.Envelope) ([]dns.RR, error) {
	var rrs []dns.RR
	var err error
	for env := range ch {
		if env.Error != nil && err == nil {
			err = env.Error
		}
		rrs = append(rrs, env.RR...)
	}
	return rrs, err
}

// Query asks the secondary one question over UDP, and again over TCP when
// the answer is truncated.
func (s *Secondary) Query(name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.RecursionDesired = false
	m.SetEdns0(1232, false)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, s.Addr())
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.Exchange(m, s.Addr())
	}
	if err != nil {
		return nil, fmt.Errorf("query %s %s at %s: %w", name, dns.TypeToString[qtype], s.cfg.Kind, err)
	}
	return r, nil
}
