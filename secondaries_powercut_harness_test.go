//go:build linux

package main

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// The secondaries' side of TestPowerCutServe: that they converge on cns
// after each restart, and how.

// waitSerials waits until every secondary serves every zone at cns's
// serial.
func (r *powerRig) waitSerials() {
	t := r.t
	for _, z := range r.zones {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(z), dns.TypeSOA)
		var want uint32
		waitFor(t, "cns to answer "+z, 10*time.Second, func() bool {
			resp, _, err := (&dns.Client{Timeout: time.Second}).Exchange(m, r.primary())
			if err != nil || len(resp.Answer) != 1 {
				return false
			}
			want = resp.Answer[0].(*dns.SOA).Serial
			return true
		})
		// The serial check may raise it past the secondaries meanwhile.
		deadline := time.Now().Add(interopPropagation)
		for _, s := range r.secs {
			for {
				got, _ := s.Serial(z)
				if got == want {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d: %s serves %s at %d, cns at %d\ncns log:\n%s", r.round, s.Kind(), z, got, want, tailLines(r.cns.log(), 30))
				}
				time.Sleep(10 * time.Millisecond)
				if resp, _, err := (&dns.Client{Timeout: time.Second}).Exchange(m, r.primary()); err == nil && len(resp.Answer) == 1 {
					want = resp.Answer[0].(*dns.SOA).Serial
				}
			}
		}
	}
}

// compareSecondaries checks every secondary's zones against cns's, record
// for record.
func (r *powerRig) compareSecondaries() {
	t := r.t
	for _, z := range r.zones {
		ref, err := transferIn(r.primary(), axfrMsg(z))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range r.secs {
			// A secondary may be applying a transfer of its own when
			// asked (Knot then ends the answer early): ask again.
			got, err := s.Transfer(z)
			for try := 0; err != nil && try < 5; try++ {
				time.Sleep(100 * time.Millisecond)
				got, err = s.Transfer(z)
			}
			if err != nil {
				t.Fatalf("round %d: %v", r.round, err)
			}
			if d := diffRRs(ref[:len(ref)-1], got); d != "" {
				t.Fatalf("round %d: %s's %s differs from cns's (- cns, + %s):\n%s", r.round, s.Kind(), z, s.Kind(), d)
			}
		}
	}
}

func axfrMsg(zone string) *dns.Msg {
	m := new(dns.Msg)
	m.SetAxfr(dns.Fqdn(zone))
	return m
}

// checkTransfers compares the first transfer cns sent each secondary of
// each zone since it started with what the durable journal held: IXFR
// from a serial it started from, AXFR from any other; or AXFR where the
// difference is bigger than the zone, which an IXFR the test asks for
// from that serial must then confirm (cns sends the whole zone).
func (r *powerRig) checkTransfers() {
	if r.ixfrable == nil {
		return
	}
	first := map[string]logLine{} // "kind zone" → cns's log line
	r.cns.mu.Lock()
	lines := slices.Clone(r.cns.lines)
	r.cns.mu.Unlock()
	for _, l := range lines {
		if l.str("msg") != "transfer" || l.str("asked") != "IXFR" || (l.str("kind") != "IXFR" && l.str("kind") != "AXFR") {
			continue
		}
		host, _, _ := strings.Cut(l.str("client"), ":")
		k, ok := r.secAddr[host]
		if !ok {
			continue
		}
		// The secondary's first IXFR from the serial it held at the cut
		// (it may have asked for the whole zone itself, after an IXFR it
		// could not apply: NSD does).
		if from, _ := l["from"].(float64); uint32(from) != r.before[k][l.str("zone")] {
			continue
		}
		key := string(k) + " " + l.str("zone")
		if _, ok := first[key]; !ok {
			first[key] = l
		}
	}
	soa := &dns.SOA{Ns: "ns.invalid.", Mbox: "hostmaster.invalid."}
	for _, s := range r.secs {
		for _, z := range r.zones {
			l, ok := first[string(s.Kind())+" "+z]
			if !ok {
				continue // the zone did not change since the secondary's serial
			}
			from := r.before[s.Kind()][z]
			want := "AXFR"
			if r.ixfrable[s.Kind()][z] {
				want = "IXFR"
			}
			got := l.str("kind")
			switch {
			case got == want:
				r.stats.xfrs[got]++
			case got == "AXFR":
				// Held, but bigger than the zone?
				res, _, err := ixfrFrom(r.primary(), z, from, soa)
				if err != nil || !res.full {
					r.t.Fatalf("round %d: cns sent %s the whole %s although its journal starts from the serial it held, %d (an IXFR now: %+v, %v)",
						r.round, s.Kind(), z, from, res, err)
				}
				r.stats.xfrs["AXFR (difference bigger than the zone)"]++
			default:
				var said []string
				for _, l := range lines {
					if l.str("zone") == z || l["zone"] == nil {
						b, _ := json.Marshal(l)
						said = append(said, string(b))
					}
				}
				r.t.Fatalf("round %d: cns sent %s an IXFR of %s from serial %d, which its durable journal did not start from, or its db could not vouch for (%s); cns's log:\n%s\nthe life before the cut:\n%s",
					r.round, s.Kind(), z, from, r.inspected, strings.Join(said, "\n"), tailLines(r.lastLog, 60))
			}
		}
	}
}

// checkIXFRs asks for an IXFR from every serial an AXFR was taken at and
// applies it to that AXFR: it must give the current zone.
func (r *powerRig) checkIXFRs(serial uint32, cur zoneContent) {
	soa := &dns.SOA{Ns: "ns.invalid.", Mbox: "hostmaster.invalid."}
	for _, from := range slices.Sorted(maps.Keys(r.seen)) {
		res, rrs, err := ixfrFrom(r.primary(), demoZone, from, soa)
		if err != nil {
			r.t.Fatalf("round %d: IXFR from %d: %v", r.round, from, err)
		}
		switch {
		case res.upToDate:
			if from != serial {
				r.t.Fatalf("round %d: IXFR from %d answered up to date at %d", r.round, from, serial)
			}
		case res.full:
			got := zoneContent{}
			for _, rr := range rrs[1 : len(rrs)-1] {
				got[rrText(rr)] = true
			}
			if !maps.Equal(got, cur) {
				r.t.Fatalf("round %d: IXFR from %d: a whole zone unlike the AXFR:%s", r.round, from, diffContent(got, cur))
			}
		default:
			got, err := res.apply(r.seen[from])
			if err != nil {
				r.t.Fatalf("round %d: IXFR from %d on the AXFR taken at %d: %v", r.round, from, from, err)
			}
			if !maps.Equal(got, cur) {
				r.t.Fatalf("round %d: IXFR from %d applied to the AXFR taken there differs from the current zone:%s", r.round, from, diffContent(got, cur))
			}
		}
	}
}
