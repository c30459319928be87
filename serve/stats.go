package serve

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/miekg/dns"
)

// Query counters. Each UDP socket goroutine has its own set, so counting
// costs an uncontended atomic add; readers sum them.

// countedTypes are the query types counted by name; the rest are "other".
var countedTypes = []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeSRV, dns.TypePTR, dns.TypeCNAME,
	dns.TypeSOA, dns.TypeNS, dns.TypeANY, dns.TypeAXFR, dns.TypeIXFR}

const otherType = 11 // index of "other" in a counters' types

var typeIndex = func() [256]uint8 {
	var idx [256]uint8
	for i := range idx {
		idx[i] = otherType
	}
	for i, t := range countedTypes {
		if t < 256 {
			idx[t] = uint8(i)
		}
	}
	return idx
}()

// counters counts answers by query type and by rcode, per transport.
type counters struct {
	types   [2][otherType + 1]atomic.Uint64 // [udp, tcp]
	rcodes  [2][24]atomic.Uint64            // extended rcodes up to BADCOOKIE
	dropped atomic.Uint64                   // requests not answered at all
	// Client answers: owner-less names answered in the caller's scope,
	// and owner-less names from callers identified as no one.
	scoped, unidentified atomic.Uint64
}

// count records one answered request.
func (c *counters) count(q *query, resp []byte) {
	tr := 0
	if q.tcp {
		tr = 1
	}
	if resp == nil {
		c.dropped.Add(1)
		return
	}
	ti := uint8(otherType)
	if q.qtype < 256 {
		ti = typeIndex[q.qtype]
	}
	c.types[tr][ti].Add(1)
	switch q.scope {
	case scopeAnswered:
		c.scoped.Add(1)
	case scopeUnidentified:
		c.unidentified.Add(1)
	}
	rcode := int(resp[3] & 0x0F)
	if len(resp) >= headerLen && binary.BigEndian.Uint16(resp[10:]) > 0 && q.edns && rcode == 0 {
		// An extended rcode lives in the OPT record; the only one cns sends
		// with a zero header rcode is BADVERS.
		if q.ednsVersion > 0 {
			rcode = rcodeBadVer
		}
	}
	if rcode < len(c.rcodes[tr]) {
		c.rcodes[tr][rcode].Add(1)
	}
}

// QueryStats is a snapshot of the query counters.
type QueryStats struct {
	// ByType and ByRcode count answers per transport ("udp", "tcp") and
	// query type or rcode name.
	ByType  map[string]map[string]uint64
	ByRcode map[string]map[string]uint64
	Dropped uint64
	// ClientScoped counts owner-less names answered in the asking
	// instance's scope; Unidentified those whose caller was no one (or
	// several instances).
	ClientScoped, Unidentified uint64
}

// QueryStats sums the counters of every socket.
func (s *Server) QueryStats() QueryStats {
	st := QueryStats{ByType: map[string]map[string]uint64{}, ByRcode: map[string]map[string]uint64{}}
	s.lmu.Lock()
	all := append([]*counters{&s.tcpCounters}, s.udpCounters...)
	s.lmu.Unlock()
	for tr, name := range []string{"udp", "tcp"} {
		st.ByType[name] = map[string]uint64{}
		st.ByRcode[name] = map[string]uint64{}
		for _, c := range all {
			for i := range c.types[tr] {
				n := c.types[tr][i].Load()
				if n == 0 {
					continue
				}
				t := "other"
				if i < len(countedTypes) {
					t = dns.TypeToString[countedTypes[i]]
				}
				st.ByType[name][t] += n
			}
			for rc := range c.rcodes[tr] {
				if n := c.rcodes[tr][rc].Load(); n > 0 {
					rn := dns.RcodeToString[rc]
					if rn == "" {
						rn = "RCODE" + string(rune('0'+rc))
					}
					st.ByRcode[name][rn] += n
				}
			}
		}
	}
	for _, c := range all {
		st.Dropped += c.dropped.Load()
		st.ClientScoped += c.scoped.Load()
		st.Unidentified += c.unidentified.Load()
	}
	return st
}
