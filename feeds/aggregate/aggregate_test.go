package aggregate

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func rrs(t *testing.T, lines ...string) []dns.RR {
	t.Helper()
	var out []dns.RR
	for _, l := range lines {
		rr, err := dns.NewRR(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rr)
	}
	return out
}

const soa1 = "a.example. 30 IN SOA ns.a.example. h.a.example. 1 30 60 600 30"
const soa2 = "a.example. 30 IN SOA ns.a.example. h.a.example. 2 30 60 600 30"
const soa3 = "a.example. 30 IN SOA ns.a.example. h.a.example. 3 30 60 600 30"

// A transfer is accepted only whole and well formed (RFC 1995, RFC 5936).
func TestParseTransfer(t *testing.T) {
	c := &client{zone: "a.example.", maxRRs: 9}
	for _, tc := range []struct {
		name   string
		rrs    []string
		serial uint32
		ixfr   bool
		err    string
		full   bool
		diffs  int
	}{
		{"axfr", []string{soa2, "x.a.example. 30 IN A 10.0.0.1", soa2}, 0, false, "", true, 0},
		{"ixfr answered in full", []string{soa2, "x.a.example. 30 IN A 10.0.0.1", soa2}, 1, true, "", true, 0},
		{"ixfr", []string{soa3, soa1, "x.a.example. 30 IN A 10.0.0.1", soa2, "x.a.example. 30 IN A 10.0.0.2", soa2, soa3, "y.a.example. 30 IN A 10.0.0.3", soa3}, 1, true, "", false, 2},
		{"up to date", []string{soa1}, 1, true, "up to date", false, 0},
		{"no SOA first", []string{"x.a.example. 30 IN A 10.0.0.1", soa2}, 0, false, "does not start with the zone's SOA", false, 0},
		{"no SOA last", []string{soa2, "x.a.example. 30 IN A 10.0.0.1"}, 0, false, "does not end", false, 0},
		{"outside the zone", []string{soa2, "x.b.example. 30 IN A 10.0.0.1", soa2}, 0, false, "outside the zone", false, 0},
		{"SOA in the middle", []string{soa2, soa1, "x.a.example. 30 IN A 10.0.0.1", soa2}, 0, false, "SOA in its middle", false, 0},
		{"records after the end", []string{soa2, "x.a.example. 30 IN A 10.0.0.1", soa2, "y.a.example. 30 IN A 10.0.0.1"}, 0, false, "after the closing SOA", false, 0},
		{"too large", []string{soa2, "a.a.example. 30 IN A 10.0.0.1", "b.a.example. 30 IN A 10.0.0.1", "c.a.example. 30 IN A 10.0.0.1",
			"d.a.example. 30 IN A 10.0.0.1", "e.a.example. 30 IN A 10.0.0.1", "f.a.example. 30 IN A 10.0.0.1", "g.a.example. 30 IN A 10.0.0.1",
			"h.a.example. 30 IN A 10.0.0.1", soa2}, 0, false, "larger than 9 records", false, 0},
		{"ixfr from another serial", []string{soa3, soa2, soa3, "y.a.example. 30 IN A 10.0.0.3", soa3}, 1, true, "does not start at serial 1", false, 0},
		{"ixfr not reaching the source", []string{soa3, soa1, soa2, soa3}, 1, true, "ends at serial 2", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := c.parse(rrs(t, tc.rrs...), tc.serial, tc.ixfr)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tr.full != tc.full || len(tr.diffs) != tc.diffs {
				t.Fatalf("full %v diffs %d", tr.full, len(tr.diffs))
			}
		})
	}
}

func zoneOf(t *testing.T, lines ...string) names {
	t.Helper()
	z := names{}
	for _, rr := range rrs(t, lines...) {
		if err := z.add(rr); err != nil {
			t.Fatal(err)
		}
	}
	return z
}

// IXFR differences change only the names they touch; a full transfer
// reports the names that went away.
func TestApplyTransfers(t *testing.T) {
	c := names{}
	changed := c.applyFull(zoneOf(t, "x.a.example. 30 IN A 10.0.0.1", "x.a.example. 30 IN A 10.0.0.2", "y.a.example. 30 IN A 10.0.0.3"))
	if len(changed) != 2 {
		t.Fatalf("full: %v", changed)
	}
	c.apply(changed)
	changed, err := c.applyDiffs([]diff{{from: 1, to: 2,
		del: rrs(t, "x.a.example. 30 IN A 10.0.0.1", "y.a.example. 30 IN A 10.0.0.3"),
		add: rrs(t, "z.a.example. 30 IN A 10.0.0.4")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != 3 || changed["y.a.example."] != nil || changed["z.a.example."] == nil {
		t.Fatalf("diff changed %v", changed)
	}
	if c["y.a.example."] == nil {
		t.Fatal("applyDiffs changed the copy before apply")
	}
	c.apply(changed)
	got := c.applyFull(zoneOf(t, "x.a.example. 30 IN A 10.0.0.2", "z.a.example. 30 IN A 10.0.0.4"))
	if len(got) != 0 {
		t.Fatalf("the copy after the diff differs from the zone: %v", got)
	}
}

// The suffix changes in owner names and RDATA; the source's apex NS and
// SOA stay behind; a name too long under the region is refused.
func TestRename(t *testing.T) {
	r := rename{region: "region.example.", source: "a.example."}
	c := names{}
	for _, rr := range rrs(t, "a.example. 30 IN NS ns.a.example.", "a.example. 30 IN TXT \"apex\"",
		"_http._tcp.svc.a.example. 30 IN SRV 0 10 80 web.inst.a.example.",
		"www.a.example. 30 IN CNAME web.inst.a.example.", "ext.a.example. 30 IN CNAME host.other.example.") {
		if err := c.add(rr); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{
		"a.example.":                "region.example.\t30\tIN\tTXT\t\"apex\"",
		"_http._tcp.svc.a.example.": "_http._tcp.svc.region.example.\t30\tIN\tSRV\t0 10 80 web.inst.region.example.",
		"www.a.example.":            "www.region.example.\t30\tIN\tCNAME\tweb.inst.region.example.",
		"ext.a.example.":            "ext.region.example.\t30\tIN\tCNAME\thost.other.example.",
	}
	for name, w := range want {
		recs, ok, err := r.records(name, c[name])
		if err != nil || !ok || len(recs) != 1 || recs[0].String() != w {
			t.Errorf("%s: %v %v %v, want %s", name, recs, ok, err, w)
		}
	}
	long := rename{region: strings.Repeat("r", 60) + "." + strings.Repeat("r", 60) + ".example.", source: "a.example."}
	name := strings.Repeat("x", 60) + "." + strings.Repeat("y", 60) + "." + strings.Repeat("z", 50) + ".a.example."
	if _, ok := long.name(name); ok {
		t.Errorf("%s fits under %s", name, long.region)
	}
	if u := pseudoUUID("r/a", "x."); len(u) != 36 || u[14] != '8' || u != pseudoUUID("r/a", "x.") {
		t.Errorf("pseudoUUID %s", u)
	}
}
