package main

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestDefaultDataCenterLiterals asks the binary, serving the embedded
// default data center, for one name of every record kind cns makes, and
// compares with answers written out by hand from RFD 1 and the reviewed
// goldens (feeds/records/testdata/dc.golden, testdata/zones). Unlike
// TestDefaultDataCenterAnswers, nothing here is computed by cns's own
// code: a wrong rule in records cannot agree with itself.
func TestDefaultDataCenterLiterals(t *testing.T) {
	p := startCNS(t, testConfig(t, t.TempDir(), "testdata/inventory.json", nil))
	p.waitCommitted(0)
	const z = "us-west-1.cns.example.com."
	grpcConfig := `"grpc_config=[{\"clientLanguage\":[\"GO\"],\"percentage\":10,\"serviceConfig\":{\"loadBalancingConfig\":[{\"pick_first\":{}}]}},{\"serviceConfig\":{\"loadBalancingConfig\":[{\"round_robin\":{}}],\"methodConfig\":[{\"name\":[{\"service\":\"helloworld.Greeter\"}],\"timeout\":\"2s\",\"wait" "ForReady\":true}]}}]"`
	for _, tc := range []struct {
		kind   string
		name   string
		qtype  uint16
		answer []string
		extra  []string // additional section, for SRV
	}{
		{"instance A by alias", "web0.inst.alice." + z, dns.TypeA,
			[]string{"web0.inst.alice." + z + " 30 IN A 198.51.100.30"}, nil},
		{"instance AAAA", "web0.inst.alice." + z, dns.TypeAAAA,
			[]string{"web0.inst.alice." + z + " 30 IN AAAA 2001:db8:100::1e"}, nil},
		{"instance TXT: the VM's uuid", "web0.inst.alice." + z, dns.TypeTXT,
			[]string{"web0.inst.alice." + z + ` 30 IN TXT "fb576cd8-2cf6-4182-b2a9-c6ba9c73834e"`}, nil},
		{"service A", "nginx.svc.bob." + z, dns.TypeA,
			[]string{"nginx.svc.bob." + z + " 30 IN A 198.51.100.40"}, nil},
		{"service SRV, one per port, with the targets' addresses", "nginx.svc.bob." + z, dns.TypeSRV,
			[]string{"nginx.svc.bob." + z + " 30 IN SRV 0 10 443 nginx-1.inst.bob." + z,
				"nginx.svc.bob." + z + " 30 IN SRV 0 10 80 nginx-1.inst.bob." + z},
			[]string{"nginx-1.inst.bob." + z + " 30 IN A 198.51.100.40", "nginx-1.inst.bob." + z + " 30 IN AAAA 2001:db8:100::28"}},
		{"gRPC balancer SRV", "_grpclb._tcp.greeter.svc.bob." + z, dns.TypeSRV,
			[]string{"_grpclb._tcp.greeter.svc.bob." + z + " 30 IN SRV 0 0 1234 greeter-lb.svc.bob." + z},
			[]string{"greeter-lb.svc.bob." + z + " 30 IN A 198.51.100.61", "greeter-lb.svc.bob." + z + " 30 IN AAAA 2001:db8:100::3d"}},
		{"gRPC service config TXT", "_grpc_config.greeter.svc.bob." + z, dns.TypeTXT,
			[]string{"_grpc_config.greeter.svc.bob." + z + " 30 IN TXT " + grpcConfig}, nil},
		{"VM CMON CNAME, followed in the zone", "062fe3bb-4589-4ad5-bf6d-a92eb3c9f639.cmon." + z, dns.TypeA,
			[]string{"062fe3bb-4589-4ad5-bf6d-a92eb3c9f639.cmon." + z + " 30 IN CNAME cmon." + z,
				"cmon." + z + " 30 IN A 198.51.100.21"}, nil},
		{"compute node CMON CNAME (the headnode), followed in the zone", "6da8b7df-c541-498f-90ef-01d5730ef236.cmon." + z, dns.TypeA,
			[]string{"6da8b7df-c541-498f-90ef-01d5730ef236.cmon." + z + " 30 IN CNAME cmon." + z,
				"cmon." + z + " 30 IN A 198.51.100.21"}, nil},
		{"compute node CMON CNAME of a CN down for years (cn03)", "e3613df8-56e3-4980-95bc-aa15f79de39f.cmon.us-west-1.int.example.com.", dns.TypeCNAME,
			[]string{"e3613df8-56e3-4980-95bc-aa15f79de39f.cmon.us-west-1.int.example.com. 30 IN CNAME cmon.us-west-1.int.example.com."}, nil},
		{"IPv4 PTR", "30.100.51.198.in-addr.arpa.", dns.TypePTR,
			[]string{"30.100.51.198.in-addr.arpa. 30 IN PTR web0.inst.alice." + z}, nil},
		{"IPv6 PTR", "e.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.8.b.d.0.1.0.0.2.ip6.arpa.", dns.TypePTR,
			[]string{"e.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.8.b.d.0.1.0.0.2.ip6.arpa. 30 IN PTR web0.inst.alice." + z}, nil},
	} {
		r := p.query("tcp", tc.name, tc.qtype)
		got, extra := rrStrings(r.Answer), rrStrings(r.Extra)
		want, wantExtra := slices.Sorted(slices.Values(tc.answer)), slices.Sorted(slices.Values(tc.extra))
		if r.Rcode != dns.RcodeSuccess || !r.Authoritative || !slices.Equal(got, want) {
			t.Errorf("%s: %s %s: rcode %s aa %v\n got %q\nwant %q", tc.kind, tc.name, dns.TypeToString[tc.qtype],
				dns.RcodeToString[r.Rcode], r.Authoritative, got, want)
		}
		if tc.extra != nil && !slices.Equal(extra, wantExtra) {
			t.Errorf("%s: %s additional section\n got %q\nwant %q", tc.kind, tc.name, extra, wantExtra)
		}
	}
}

// rrStrings is records as sorted text, tabs as spaces, OPT left out.
func rrStrings(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		out = append(out, strings.ReplaceAll(rr.String(), "\t", " "))
	}
	sort.Strings(out)
	return out
}
