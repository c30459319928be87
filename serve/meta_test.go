package serve

import (
	"io"
	"log/slog"
	"testing"

	"github.com/miekg/dns"
)

// Ensure version._cns_meta answers as the reference answers it (its own
// peer version probe asks it, IN TXT): the version as TXT, in any class,
// TTL 5, authoritative; no data for other types; NXDOMAIN for any other
// name under _cns_meta; and REFUSED, like any name outside cns's zones,
// when the version is hidden.
func TestCNSMetaVersion(t *testing.T) {
	const meta = "1.2.3 (abcdef123456), go1.25.0"
	store := testStore(t)
	serveWith := func(metaVersion string) string {
		s, err := New(Config{Listen: []string{"127.0.0.1:0"}, MetaVersion: metaVersion, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Listen(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		udp, _ := s.Addrs()
		return udp[0]
	}
	shown, hidden := serveWith(meta), serveWith("")
	for _, tc := range []struct {
		name   string
		addr   string
		qname  string
		qtype  uint16
		qclass uint16
		rcode  int
		answer string // "" : none
	}{
		{"IN TXT", shown, "version._cns_meta.", dns.TypeTXT, dns.ClassINET, dns.RcodeSuccess, `version._cns_meta. 5 IN TXT "` + meta + `"`},
		{"case folded", shown, "VERSION._CNS_META.", dns.TypeTXT, dns.ClassINET, dns.RcodeSuccess, `VERSION._CNS_META. 5 IN TXT "` + meta + `"`},
		{"CH TXT", shown, "version._cns_meta.", dns.TypeTXT, dns.ClassCHAOS, dns.RcodeSuccess, `version._cns_meta. 5 CH TXT "` + meta + `"`},
		{"ANY class", shown, "version._cns_meta.", dns.TypeTXT, dns.ClassANY, dns.RcodeSuccess, `version._cns_meta. 5 IN TXT "` + meta + `"`},
		{"ANY type", shown, "version._cns_meta.", dns.TypeANY, dns.ClassINET, dns.RcodeSuccess, `version._cns_meta. 5 IN TXT "` + meta + `"`},
		{"A: no data", shown, "version._cns_meta.", dns.TypeA, dns.ClassINET, dns.RcodeSuccess, ""},
		{"other meta name", shown, "status._cns_meta.", dns.TypeTXT, dns.ClassINET, dns.RcodeNameError, ""},
		{"under the version", shown, "x.version._cns_meta.", dns.TypeTXT, dns.ClassINET, dns.RcodeNameError, ""},
		{"a label that only ends so", shown, "x\\009_cns_meta.", dns.TypeTXT, dns.ClassINET, dns.RcodeRefused, ""},
		{"hidden", hidden, "version._cns_meta.", dns.TypeTXT, dns.ClassINET, dns.RcodeRefused, ""},
	} {
		m := new(dns.Msg)
		m.SetQuestion(tc.qname, tc.qtype)
		m.Question[0].Qclass = tc.qclass
		r := exchange(t, tc.addr, "udp", m)
		got := render(r.Answer)
		want := []string{}
		if tc.answer != "" {
			want = []string{tc.answer}
		}
		if r.Rcode != tc.rcode || !matchRRs(got, want) {
			t.Errorf("%s: %s %q, want %s %q", tc.name, dns.RcodeToString[r.Rcode], got, dns.RcodeToString[tc.rcode], want)
		}
		if aa := r.Rcode != dns.RcodeRefused; r.Authoritative != aa {
			t.Errorf("%s: AA %v, want %v", tc.name, r.Authoritative, aa)
		}
	}
}
