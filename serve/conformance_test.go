package serve

import (
	"testing"

	"github.com/miekg/dns"
)

// Found by the differential tests against NSD and Knot (issue 12, where
// the SRV RRset given to ANY also gained its targets' addresses): QCLASS
// ANY gets the IN data without AA (RFC 6895 §3.3.2).
func TestClassANY(t *testing.T) {
	_, addr := startServer(t, testStore(t), true)
	for _, tc := range []struct {
		name  string
		rcode int
		n     int
	}{
		{"web1.inst.owner.dc.example.com.", dns.RcodeSuccess, 1},
		{"nope.dc.example.com.", dns.RcodeNameError, 0},
		{"www.example.org.", dns.RcodeRefused, 0},
	} {
		m := new(dns.Msg)
		m.SetQuestion(tc.name, dns.TypeA)
		m.Question[0].Qclass = dns.ClassANY
		r := exchange(t, addr, "udp", m)
		if r.Rcode != tc.rcode || len(r.Answer) != tc.n || r.Authoritative {
			t.Errorf("%s class ANY: %s aa=%v %v, want %s with %d records, no AA", tc.name, dns.RcodeToString[r.Rcode], r.Authoritative, r.Answer, dns.RcodeToString[tc.rcode], tc.n)
		}
	}
}
