package records

import (
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// The reference's test/unit/vm-to-zones.test.js, case by case, then the
// cases for what cns fixes. The reference tests fed precomputed
// listInstance/listServices and nic.zones; here the same situations come
// from tags, states and zone configuration through Compute.

const (
	vmID    = "abc123"
	ownerID = "def432"
	fabric  = "fabric-net" // owned by def432
	ext     = "aaaaaa"
)

var (
	foo = z("foo")
	bar = z("bar")
)

func fabricWorld() *World {
	return world(
		network(fabric, "Default-Fabric", ownerID),
		network(ext, "external"),
	)
}

type recordCase struct {
	name  string
	cfg   Config
	world *World
	vm    *dc.VM
	owner *dc.User
	// types limits the comparison to records of these types.
	types []uint16
	want  []string
	// wantNames, when set, is compared with Result.Names.
	wantNames []string
	// wantProblems are substrings, one per expected problem.
	wantProblems []string
}

func runRecordCases(t *testing.T, cases []recordCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.world
			if w == nil {
				w = fabricWorld()
			}
			owner := tc.owner
			if owner == nil {
				owner = newUser(ownerID)
			}
			res := Compute(&tc.cfg, w, Input{VM: tc.vm, Owner: owner})
			sameSet(t, "records", renderAll(res.Records, tc.types...), tc.want)
			if tc.wantNames != nil && !slices.Equal(res.Names, tc.wantNames) {
				t.Errorf("names:\n got %q\nwant %q", res.Names, tc.wantNames)
			}
			checkProblems(t, res.Problems, tc.wantProblems)
			checkOrder(t, res.Records)
		})
	}
}

func checkProblems(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("problems: got %q, want %d matching %q", got, len(want), want)
		return
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("problem %d: %q does not mention %q", i, got[i], want[i])
		}
	}
}

// checkOrder pins the documented order: zone, owner name, type, text.
func checkOrder(t *testing.T, recs []Record) {
	t.Helper()
	if !slices.IsSortedFunc(recs, func(a, b Record) int {
		if lessRecord(&a, &b) {
			return -1
		}
		if lessRecord(&b, &a) {
			return 1
		}
		return 0
	}) {
		t.Errorf("records are not in order: %q", renderAll(recs))
	}
	for _, r := range recs {
		h := r.RR.Header()
		if h.Ttl != TTL || h.Name != strings.ToLower(h.Name) || !dns.IsFqdn(h.Name) ||
			strings.HasSuffix(r.Zone, ".") || !dns.IsSubDomain(r.Zone+".", h.Name) {
			t.Errorf("bad record %q in zone %q", r.RR, r.Zone)
		}
	}
}

func TestVMToZones(t *testing.T) {
	wild := Config{Zones: []Zone{zone("foo", "*")}}
	withAlias := Config{UseAlias: true, Zones: []Zone{zone("foo", "*")}}
	withLogin := Config{UseLogin: true, Zones: []Zone{zone("foo", "*")}}
	withBoth := Config{UseAlias: true, UseLogin: true, Zones: []Zone{zone("foo", "*")}}
	const acmeTok = "OL92GcAcYP0DTCTVwMU46dpu73dAhu5XD6ahQiDg54M"

	runRecordCases(t, []recordCase{{
		name: "basic single container",
		cfg:  wild,
		vm:   newVM(vmID, nics(nic(fabric, "1.2.3.4"))),
		want: lines(
			foo.inst("abc123.inst.def432", "1.2.3.4", vmID),
			foo.inst("default-fabric.abc123.inst.def432", "1.2.3.4", vmID),
			foo.cmon(vmID),
			ptr("3.2.1.in-addr.arpa", "4", "abc123.inst.def432.foo", 1),
		),
		wantNames: []string{"abc123.inst.def432.foo", "default-fabric.abc123.inst.def432.foo"},
	}, {
		name:  "cloudapi instance",
		cfg:   wild,
		vm:    newVM(vmID, tag("smartdc_role", "cloudapi"), nics(nic(fabric, "1.2.3.4"))),
		owner: newUser(ownerID, login("admin"), cnsEnabled(""), approved("")),
		want: lines(
			foo.inst("abc123.inst.def432", "1.2.3.4", vmID),
			foo.inst("default-fabric.abc123.inst.def432", "1.2.3.4", vmID),
			foo.inst("cloudapi", "1.2.3.4", vmID),
			foo.inst("cloudapi.svc.def432", "1.2.3.4", vmID),
			foo.inst("default-fabric.cloudapi.svc.def432", "1.2.3.4", vmID),
			foo.cmon(vmID),
			ptr("3.2.1.in-addr.arpa", "4", "abc123.inst.def432.foo", 1),
		),
		wantNames: []string{
			"abc123.inst.def432.foo", "cloudapi.foo", "cloudapi.svc.def432.foo",
			"default-fabric.abc123.inst.def432.foo", "default-fabric.cloudapi.svc.def432.foo",
		},
	}, {
		name:  "with use_alias",
		cfg:   withAlias,
		world: world(network(fabric, "SDC-Customer-Public-Pool-72.2.118.0/23", ownerID)),
		vm:    newVM(vmID, alias("test"), nics(nic(fabric, "1.2.3.4"))),
		want: lines(
			foo.inst("abc123.inst.def432", "1.2.3.4", vmID),
			foo.inst("sdc-customer-public-pool-72-2-118-0-23.abc123.inst.def432", "1.2.3.4", vmID),
			foo.inst("sdc-customer-public-pool-72-2-118-0-23.test.inst.def432", "1.2.3.4", vmID),
			foo.inst("test.inst.def432", "1.2.3.4", vmID),
			foo.cmon(vmID),
			ptr("3.2.1.in-addr.arpa", "4", "test.inst.def432.foo", 1),
		),
	}, {
		name:  "with use_login, network not owned by the owner",
		cfg:   withLogin,
		world: world(network(fabric, "Default-Fabric", vmID)),
		vm:    newVM(vmID, alias("test"), nics(nic(fabric, "1.2.3.4"))),
		owner: newUser(ownerID, login("bar")),
		want: lines(
			foo.inst("abc123.inst.bar", "1.2.3.4", vmID),
			foo.inst("abc123.inst.def432", "1.2.3.4", vmID),
			foo.cmon(vmID),
			ptr("3.2.1.in-addr.arpa", "4", "abc123.inst.bar.foo", 1),
		),
	}, {
		name:  "with use_alias and use_login",
		cfg:   withBoth,
		vm:    newVM(vmID, alias("test"), nics(nic(fabric, "1.2.3.4"))),
		owner: newUser(ownerID, login("bar")),
		want: lines(
			foo.inst("abc123.inst.bar", "1.2.3.4", vmID),
			foo.inst("abc123.inst.def432", "1.2.3.4", vmID),
			foo.inst("default-fabric.abc123.inst.bar", "1.2.3.4", vmID),
			foo.inst("default-fabric.abc123.inst.def432", "1.2.3.4", vmID),
			foo.inst("default-fabric.test.inst.bar", "1.2.3.4", vmID),
			foo.inst("default-fabric.test.inst.def432", "1.2.3.4", vmID),
			foo.inst("test.inst.bar", "1.2.3.4", vmID),
			foo.inst("test.inst.def432", "1.2.3.4", vmID),
			foo.cmon(vmID),
			ptr("3.2.1.in-addr.arpa", "4", "test.inst.bar.foo", 1),
		),
	}, {
		name:  "using a PTR name",
		cfg:   withBoth,
		vm:    newVM(vmID, alias("test"), tag(tagReversePTR, "test.something.com"), nics(nic(fabric, "1.2.3.4"))),
		owner: newUser(ownerID, login("bar")),
		types: []uint16{dns.TypePTR},
		want:  lines(ptr("3.2.1.in-addr.arpa", "4", "test.something.com", 0)),
	}, {
		name: "multi-zone",
		cfg: Config{UseAlias: true, UseLogin: true, Zones: []Zone{
			zone("foo", "*"), zone("bar", ext),
		}},
		vm: newVM(vmID, alias("test"), nics(
			nic(fabric, "1.2.3.4"),
			nic(ext, "3.2.1.4"),
		)),
		owner: newUser(ownerID, login("bar")),
		want: lines(
			foo.inst("abc123.inst.bar", "1.2.3.4", vmID),
			foo.inst("abc123.inst.def432", "1.2.3.4", vmID),
			foo.inst("default-fabric.abc123.inst.bar", "1.2.3.4", vmID),
			foo.inst("default-fabric.abc123.inst.def432", "1.2.3.4", vmID),
			foo.inst("default-fabric.test.inst.bar", "1.2.3.4", vmID),
			foo.inst("default-fabric.test.inst.def432", "1.2.3.4", vmID),
			foo.inst("test.inst.bar", "1.2.3.4", vmID),
			foo.inst("test.inst.def432", "1.2.3.4", vmID),
			foo.cmon(vmID),
			bar.inst("abc123.inst.bar", "3.2.1.4", vmID),
			bar.inst("abc123.inst.def432", "3.2.1.4", vmID),
			bar.inst("test.inst.bar", "3.2.1.4", vmID),
			bar.inst("test.inst.def432", "3.2.1.4", vmID),
			bar.cmon(vmID),
			ptr("3.2.1.in-addr.arpa", "4", "test.inst.bar.foo", 1),
			ptr("1.2.3.in-addr.arpa", "4", "test.inst.bar.bar", 1),
		),
	}, {
		// The reference let the NIC be in "foo" by wildcard and in "bar"
		// explicitly at once, which its own NetFilter never does; here
		// "foo" lists the network as well as "*". The reference kept
		// only the first zone's PTR on a tie of lengths; cns emits both
		// candidates with Pref 1 and the store picks the lexically
		// first, test.inst.bar.bar (a deterministic tie-break).
		name: "multi-zone, single PTRs",
		cfg: Config{UseAlias: true, UseLogin: true, Zones: []Zone{
			zone("foo", "*", "bbbbb"), zone("bar", "bbbbb"), zone("baz", "aaaaa"),
		}},
		world: world(
			network("bbbbb", "Default-Fabric", ownerID),
			network("aaaaa", "external"),
		),
		vm: newVM(vmID, alias("test"), nics(
			nic("bbbbb", "1.2.3.4"),
			nic("aaaaa", "3.2.1.4"),
		)),
		owner: newUser(ownerID, login("bar")),
		types: []uint16{dns.TypePTR, dns.TypeCNAME},
		want: lines(
			foo.cmon(vmID), bar.cmon(vmID), z("baz").cmon(vmID),
			ptr("3.2.1.in-addr.arpa", "4", "test.inst.bar.foo", 1),
			ptr("3.2.1.in-addr.arpa", "4", "test.inst.bar.bar", 1),
			ptr("1.2.3.in-addr.arpa", "4", "test.inst.bar.baz", 1),
		),
	}, {
		// The reference chose the shortest target itself; cns leaves
		// that to the store and emits every candidate.
		name: "multi-zone, shortest zone priority PTR",
		cfg: Config{UseAlias: true, UseLogin: true, Zones: []Zone{
			zone("foobarbaz", "*", "n1"), zone("foobar", "n1"), zone("baz", "n1"),
		}},
		world: world(network("n1", "Default-Fabric", ownerID)),
		vm:    newVM(vmID, alias("test"), nics(nic("n1", "1.2.3.4"))),
		owner: newUser(ownerID, login("bar")),
		types: []uint16{dns.TypePTR},
		want: lines(
			ptr("3.2.1.in-addr.arpa", "4", "test.inst.bar.foobarbaz", 1),
			ptr("3.2.1.in-addr.arpa", "4", "test.inst.bar.foobar", 1),
			ptr("3.2.1.in-addr.arpa", "4", "test.inst.bar.baz", 1),
		),
	}, {
		name: "service with srvs",
		cfg:  withAlias,
		vm:   newVM(vmID, alias("test"), services("svc1:1234,svc1:1235"), nics(nic(fabric, "1.2.3.4"))),
		want: lines(
			foo.inst("abc123.inst.def432", "1.2.3.4", vmID),
			foo.inst("default-fabric.abc123.inst.def432", "1.2.3.4", vmID),
			foo.inst("default-fabric.test.inst.def432", "1.2.3.4", vmID),
			foo.inst("test.inst.def432", "1.2.3.4", vmID),
			foo.inst("svc1.svc.def432", "1.2.3.4", vmID),
			foo.srv("svc1.svc.def432", 0, 10, 1234, "test.inst.def432"),
			foo.srv("svc1.svc.def432", 0, 10, 1235, "test.inst.def432"),
			foo.inst("default-fabric.svc1.svc.def432", "1.2.3.4", vmID),
			foo.srv("default-fabric.svc1.svc.def432", 0, 10, 1234, "test.inst.def432"),
			foo.srv("default-fabric.svc1.svc.def432", 0, 10, 1235, "test.inst.def432"),
			foo.cmon(vmID),
			ptr("3.2.1.in-addr.arpa", "4", "test.inst.def432.foo", 1),
		),
	}, {
		name: "acme challenge support",
		cfg:  Config{UseAlias: true, Zones: []Zone{zone("foo", fabric)}},
		vm: newVM(vmID, alias("test"), services("svc1:1234"), meta(metaACME, acmeTok),
			nics(nic(fabric, "1.2.3.4"))),
		want: lines(
			foo.inst("abc123.inst.def432", "1.2.3.4", vmID),
			foo.txt("_acme-challenge.abc123.inst.def432", acmeTok),
			foo.inst("test.inst.def432", "1.2.3.4", vmID),
			foo.txt("_acme-challenge.test.inst.def432", acmeTok),
			foo.inst("svc1.svc.def432", "1.2.3.4", vmID),
			foo.srv("svc1.svc.def432", 0, 10, 1234, "test.inst.def432"),
			foo.txt("_acme-challenge.svc1.svc.def432", acmeTok),
			foo.cmon(vmID),
			ptr("3.2.1.in-addr.arpa", "4", "test.inst.def432.foo", 1),
		),
	}, {
		name: "acme challenge on unlisted service (TRITON-599)",
		cfg:  Config{UseAlias: true, Zones: []Zone{zone("foo", fabric)}},
		vm: newVM(vmID, alias("test"), state("stopped"), services("svc1:1234"),
			meta(metaACME, acmeTok), nics(nic(fabric, "1.2.3.4"))),
		want: lines(
			foo.inst("abc123.inst.def432", "1.2.3.4", vmID),
			foo.txt("_acme-challenge.abc123.inst.def432", acmeTok),
			foo.inst("test.inst.def432", "1.2.3.4", vmID),
			foo.txt("_acme-challenge.test.inst.def432", acmeTok),
			foo.txt("svc1.svc.def432", "verifying:abc123"),
			foo.txt("_acme-challenge.svc1.svc.def432", acmeTok),
			foo.cmon(vmID),
			ptr("3.2.1.in-addr.arpa", "4", "test.inst.def432.foo", 1),
		),
		wantNames: []string{"abc123.inst.def432.foo", "test.inst.def432.foo"},
	}, {
		name: "cmon everywhere",
		cfg:  Config{Zones: []Zone{zone("foo", "bbbbbb"), zone("bar", "aaaaaa")}},
		vm:   newVM(vmID, state("stopped"), nics(nic("bbbbbb", "1.2.3.4"))),
		want: lines(
			foo.inst("abc123.inst.def432", "1.2.3.4", vmID),
			foo.cmon(vmID),
			bar.cmon(vmID),
			ptr("3.2.1.in-addr.arpa", "4", "abc123.inst.def432.foo", 1),
		),
	}})
}

// Cases for what cns does differently from the reference (its §7), and
// for the corners of the input.
func TestRecordFixes(t *testing.T) {
	wild := Config{UseAlias: true, Zones: []Zone{zone("foo", "*")}}
	pub := Config{UseAlias: true, Zones: []Zone{zone("foo", ext)}}
	long := strings.Repeat("x", 63)
	// With a 201-octet zone, alias names (75 octets before it) are too
	// long while uuid names (19) are not.
	longZone := z(strings.Repeat("a.", 100) + "b")

	runRecordCases(t, []recordCase{{
		name: "alias is trimmed of hyphens",
		cfg:  pub,
		vm:   newVM(vmID, alias("_Web_1_"), nics(nic(ext, "10.0.0.1"))),
		want: lines(
			foo.inst("abc123.inst.def432", "10.0.0.1", vmID),
			foo.inst("web-1.inst.def432", "10.0.0.1", vmID),
			foo.cmon(vmID),
			ptr("0.0.10.in-addr.arpa", "1", "web-1.inst.def432.foo", 1),
		),
	}, {
		name: "alias that cleans to nothing gives no alias names",
		cfg:  pub,
		vm:   newVM(vmID, alias("__*__"), nics(nic(ext, "10.0.0.1"))),
		want: lines(
			foo.inst("abc123.inst.def432", "10.0.0.1", vmID),
			foo.cmon(vmID),
			ptr("0.0.10.in-addr.arpa", "1", "abc123.inst.def432.foo", 1),
		),
		wantProblems: []string{`alias "__*__" has no letters or digits`},
	}, {
		name: "alias over 63 octets gives no alias names",
		cfg:  pub,
		vm:   newVM(vmID, alias(long+"y"), nics(nic(ext, "10.0.0.1"))),
		want: lines(
			foo.inst("abc123.inst.def432", "10.0.0.1", vmID),
			foo.cmon(vmID),
			ptr("0.0.10.in-addr.arpa", "1", "abc123.inst.def432.foo", 1),
		),
		wantProblems: []string{"longer than 63 octets"},
	}, {
		name:  "alias of exactly 63 octets is fine (the reference stopped at 62)",
		cfg:   pub,
		vm:    newVM(vmID, alias(long), nics(nic(ext, "10.0.0.1"))),
		types: []uint16{dns.TypeA},
		want: lines(
			foo.a("abc123.inst.def432", "10.0.0.1"),
			foo.a(long+".inst.def432", "10.0.0.1"),
		),
	}, {
		name:         "network name that cleans to nothing gives no variants",
		cfg:          wild,
		world:        world(network(fabric, "///", ownerID)),
		vm:           newVM(vmID, nics(nic(fabric, "10.0.0.1"))),
		types:        []uint16{dns.TypeA},
		want:         lines(foo.a("abc123.inst.def432", "10.0.0.1")),
		wantProblems: []string{`network fabric-net: name "///" has no letters or digits`},
	}, {
		name:  "names over 253 octets are skipped, the primary name falls back",
		cfg:   Config{UseAlias: true, Zones: []Zone{zone(string(longZone), ext)}},
		vm:    newVM(vmID, alias(long), services("svc:80"), nics(nic(ext, "10.0.0.1"))),
		types: []uint16{dns.TypeA, dns.TypeSRV, dns.TypePTR},
		want: lines(
			longZone.a("abc123.inst.def432", "10.0.0.1"),
			longZone.a("svc.svc.def432", "10.0.0.1"),
			longZone.srv("svc.svc.def432", 0, 10, 80, "abc123.inst.def432"),
			ptr("0.0.10.in-addr.arpa", "1", "abc123.inst.def432."+string(longZone), 1),
		),
		wantProblems: []string{"is longer than 253 octets: skipped"},
	}, {
		name: "SRV priority and weight from the tag",
		cfg:  pub,
		vm: newVM(vmID, alias("web"),
			services("web:443:priority=5:weight=20,web:80,_http._tcp:8080:weight=0"),
			nics(nic(ext, "10.0.0.1"))),
		types: []uint16{dns.TypeSRV},
		want: lines(
			foo.srv("web.svc.def432", 5, 20, 443, "web.inst.def432"),
			foo.srv("web.svc.def432", 0, 10, 80, "web.inst.def432"),
			foo.srv("_http._tcp.svc.def432", 0, 0, 8080, "web.inst.def432"),
		),
	}, {
		// The reference emitted SRV and ACME records once per IP and zone.
		name: "SRV and ACME once per VM however many addresses",
		cfg:  pub,
		vm: newVM(vmID, services("web:80"), meta(metaACME, "tok"),
			nics(nic(ext, "10.0.0.1/24", "2001:db8::1/64"), nic(ext, "10.0.1.1/24"))),
		want: lines(
			foo.inst("abc123.inst.def432", "10.0.0.1", vmID),
			foo.aaaa("abc123.inst.def432", "2001:db8::1"),
			foo.a("abc123.inst.def432", "10.0.1.1"),
			foo.txt("_acme-challenge.abc123.inst.def432", "tok"),
			foo.inst("web.svc.def432", "10.0.0.1", vmID),
			foo.aaaa("web.svc.def432", "2001:db8::1"),
			foo.a("web.svc.def432", "10.0.1.1"),
			foo.srv("web.svc.def432", 0, 10, 80, "abc123.inst.def432"),
			foo.txt("_acme-challenge.web.svc.def432", "tok"),
			foo.cmon(vmID),
			ptr("0.0.10.in-addr.arpa", "1", "abc123.inst.def432.foo", 1),
			ptr("1.0.10.in-addr.arpa", "1", "abc123.inst.def432.foo", 1),
			ptr("0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa", "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0",
				"abc123.inst.def432.foo", 1),
		),
	}, {
		name:  "ACME value with runs of white space",
		cfg:   pub,
		vm:    newVM(vmID, meta(metaACME, " tok1  tok2\ttok3 "), nics(nic(ext, "10.0.0.1"))),
		types: []uint16{dns.TypeTXT},
		want: lines(
			foo.txt("abc123.inst.def432", vmID),
			foo.txt("_acme-challenge.abc123.inst.def432", "tok1"),
			foo.txt("_acme-challenge.abc123.inst.def432", "tok2"),
			foo.txt("_acme-challenge.abc123.inst.def432", "tok3"),
		),
	}, {
		name:         "ACME token too long for a TXT string",
		cfg:          pub,
		vm:           newVM(vmID, meta(metaACME, "ok "+strings.Repeat("x", 256)), nics(nic(ext, "10.0.0.1"))),
		types:        []uint16{dns.TypeTXT},
		want:         lines(foo.txt("abc123.inst.def432", vmID), foo.txt("_acme-challenge.abc123.inst.def432", "ok")),
		wantProblems: []string{"is longer than a TXT string"},
	}, {
		name:         "ACME value that is not a string",
		cfg:          pub,
		vm:           newVM(vmID, meta(metaACME, 42.0), nics(nic(ext, "10.0.0.1"))),
		types:        []uint16{dns.TypeTXT},
		want:         lines(foo.txt("abc123.inst.def432", vmID)),
		wantProblems: []string{"want a string, got a number"},
	}, {
		name: "network listed with its pool: each record once",
		cfg:  Config{Zones: []Zone{zone("foo", ext, "pool-1")}},
		world: func() *World {
			w := fabricWorld()
			w.Pools[ext] = []string{"pool-1"}
			return w
		}(),
		vm: newVM(vmID, services("web"), nics(nic(ext, "10.0.0.1"))),
		want: lines(
			foo.inst("abc123.inst.def432", "10.0.0.1", vmID),
			foo.inst("web.svc.def432", "10.0.0.1", vmID),
			foo.cmon(vmID),
			ptr("0.0.10.in-addr.arpa", "1", "abc123.inst.def432.foo", 1),
		),
	}, {
		name:  "two VMs with one alias: each contributes its own records",
		cfg:   pub,
		vm:    newVM("bbb222", alias("web"), nics(nic(ext, "10.0.0.2"))),
		types: []uint16{dns.TypeA, dns.TypeTXT},
		want: lines(
			foo.inst("bbb222.inst.def432", "10.0.0.2", "bbb222"),
			foo.inst("web.inst.def432", "10.0.0.2", "bbb222"),
		),
	}, {
		name: "addresses: prefixes stripped, dhcp and addrconf skipped, junk reported",
		cfg:  pub,
		vm: newVM(vmID, nics(dc.NIC{
			NetworkUUID: ext,
			IPs:         []string{"dhcp", "addrconf", "10.0.0.1/24", "fe80::1%net0", "10.0.0.300", "", "::ffff:10.0.0.2"},
		})),
		types: []uint16{dns.TypeA, dns.TypeAAAA},
		want: lines(
			foo.a("abc123.inst.def432", "10.0.0.1"),
			foo.a("abc123.inst.def432", "10.0.0.2"),
		),
		wantProblems: []string{`"fe80::1%net0" is not an IP address`, `"10.0.0.300" is not`, `"" is not`},
	}, {
		name:  "legacy NIC with only ip",
		cfg:   pub,
		vm:    newVM(vmID, nics(dc.NIC{NetworkUUID: ext, IP: "10.0.0.1"})),
		types: []uint16{dns.TypeA},
		want:  lines(foo.a("abc123.inst.def432", "10.0.0.1")),
	}, {
		name: "admin and manta NICs are never published",
		cfg:  Config{Zones: []Zone{zone("foo", "*")}},
		vm: newVM(vmID, nics(
			taggedNIC("admin-net", "admin", 0, "10.99.99.5/24"),
			taggedNIC("rack-net", "ADMIN_rack_R12", 0, "10.99.98.5/24"),
			dc.NIC{NetworkUUID: "admin-net", NICTag: "admin", IPs: []string{"10.99.99.6/24"}},
			taggedNIC("manta-net", "manta", 5, "10.77.0.5/24"),
			taggedNIC("tagged-admin", "admin", 5, "10.55.0.5/24"),
		)),
		types: []uint16{dns.TypeA},
		want:  lines(foo.a("abc123.inst.def432", "10.55.0.5")),
	}, {
		name:  "use_login with a login that needs cleaning",
		cfg:   Config{UseLogin: true, Zones: []Zone{zone("foo", ext)}},
		vm:    newVM(vmID, services("db"), nics(nic(ext, "10.0.0.1"))),
		owner: newUser(ownerID, login("John.Doe@example")),
		types: []uint16{dns.TypeA},
		want: lines(
			foo.a("abc123.inst.def432", "10.0.0.1"),
			foo.a("abc123.inst.john-doe-example", "10.0.0.1"),
			foo.a("db.svc.def432", "10.0.0.1"),
			foo.a("db.svc.john-doe-example", "10.0.0.1"),
		),
	}, {
		name: "reverse_ptr is lower-cased and a trailing hyphen refused",
		cfg:  pub,
		vm: newVM(vmID, tag(tagReversePTR, "bad-.example.com"),
			tag(dockerLabel+tagReversePTR, "Mail.Example.COM"), nics(nic(ext, "10.0.0.1"))),
		types:        []uint16{dns.TypePTR},
		want:         lines(ptr("0.0.10.in-addr.arpa", "1", "mail.example.com", 0)),
		wantProblems: []string{`tag triton.cns.reverse_ptr "bad-.example.com" ignored`},
	}, {
		name:  "upper-case VM and owner UUIDs",
		cfg:   pub,
		vm:    newVM("ABC123", nics(nic(ext, "10.0.0.1"))),
		owner: newUser("DEF432"),
		types: []uint16{dns.TypeA, dns.TypeTXT},
		want:  foo.inst("abc123.inst.def432", "10.0.0.1", vmID),
	}, {
		name:         "a VM UUID that is no label gives no records",
		cfg:          pub,
		vm:           newVM("abc.123", nics(nic(ext, "10.0.0.1"))),
		wantProblems: []string{`VM uuid "abc.123"`},
	}, {
		name:  "NIC with an unknown network is placed by the wildcard",
		cfg:   Config{Zones: []Zone{zone("foo", "*")}},
		vm:    newVM(vmID, nics(nic("nowhere", "10.0.0.1"), nic("", "10.0.0.2"))),
		types: []uint16{dns.TypeA},
		want: lines(
			foo.a("abc123.inst.def432", "10.0.0.1"),
			foo.a("abc123.inst.def432", "10.0.0.2"),
		),
	}, {
		name: "IPv6 only",
		cfg:  pub,
		vm:   newVM(vmID, nics(nic(ext, "2001:db8:1:2::a/64"))),
		want: lines(
			foo.inst("abc123.inst.def432", "2001:db8:1:2::a", vmID),
			foo.cmon(vmID),
			ptr("2.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa", "a.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0",
				"abc123.inst.def432.foo", 1),
		),
	}, {
		name: "destroyed VM has nothing",
		cfg:  pub,
		vm:   newVM(vmID, destroyed(), services("web"), nics(nic(ext, "10.0.0.1"))),
		want: nil,
	}, {
		name:  "owner not opted in has nothing",
		cfg:   pub,
		vm:    newVM(vmID, services("web"), nics(nic(ext, "10.0.0.1"))),
		owner: newUser(ownerID, cnsEnabled("false")),
		want:  nil,
	}, {
		// The reference: a reverse_ptr tag lists the instance of an owner
		// who has not opted in, and its services get the "verifying:" TXT.
		name:  "reverse_ptr for an owner not opted in",
		cfg:   pub,
		vm:    newVM(vmID, services("web"), tag(tagReversePTR, "mail.example.com"), nics(nic(ext, "10.0.0.1"))),
		owner: newUser(ownerID, cnsEnabled("false")),
		want: lines(
			foo.inst("abc123.inst.def432", "10.0.0.1", vmID),
			foo.txt("web.svc.def432", "verifying:abc123"),
			foo.cmon(vmID),
			ptr("0.0.10.in-addr.arpa", "1", "mail.example.com", 0),
		),
	}})
}

func TestHeldServices(t *testing.T) {
	cfg := &Config{Zones: []Zone{zone("foo", ext)}}
	down := meta(metaStatus, "down")
	vmNIC := nics(nic(ext, "10.0.0.1"))
	cases := []struct {
		name        string
		vm          *dc.VM
		cnDown      bool
		held        []string
		wantReasons []Reason
		// wantListed are the services with A records.
		wantListed []string
	}{
		{"status down, nothing held", newVM(vmID, down, services("web,api"), vmNIC), false, nil,
			[]Reason{ReasonInstEnFlag}, nil},
		{"status down, web held", newVM(vmID, down, services("web,api"), vmNIC), false, []string{"web", "other"},
			[]Reason{ReasonInstEnFlag, ReasonHeld}, []string{"web"}},
		{"held names compare in lower case", newVM(vmID, down, services("web"), vmNIC), false, []string{"WEB"},
			[]Reason{ReasonInstEnFlag, ReasonHeld}, []string{"web"}},
		{"stopped VM is not held", newVM(vmID, down, state("stopped"), services("web"), vmNIC), false, []string{"web"},
			[]Reason{ReasonInstEnFlag}, nil},
		{"CN down is not held", newVM(vmID, down, services("web"), vmNIC), true, []string{"web"},
			[]Reason{ReasonInstEnFlag}, nil},
		{"disabled is not held", newVM(vmID, down, tag(tagDisable, true), services("web"), vmNIC), false, []string{"web"},
			[]Reason{ReasonInstEnFlag, ReasonInstEnTag}, nil},
		{"status up needs no hold", newVM(vmID, services("web"), vmNIC), false, []string{"web"},
			nil, []string{"web"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Compute(cfg, fabricWorld(), Input{VM: tc.vm, Owner: newUser(ownerID), CNDown: tc.cnDown, HeldServices: tc.held})
			if !slices.Equal(res.Reasons, tc.wantReasons) {
				t.Errorf("reasons %q, want %q", res.Reasons, tc.wantReasons)
			}
			var listed []string
			for _, r := range res.Records {
				if a, ok := r.RR.(*dns.A); ok && strings.Contains(a.Hdr.Name, ".svc.") {
					listed = append(listed, strings.SplitN(a.Hdr.Name, ".", 2)[0])
				}
			}
			if !slices.Equal(listed, tc.wantListed) {
				t.Errorf("services with addresses %q, want %q", listed, tc.wantListed)
			}
			for _, r := range res.Records {
				if tx, ok := r.RR.(*dns.TXT); ok && strings.HasPrefix(tx.Hdr.Name, "api.") &&
					tx.Txt[0] != "verifying:"+vmID {
					t.Errorf("unheld service api has %q", tx)
				}
			}
		})
	}
}

func TestReverseName(t *testing.T) {
	for _, tc := range []struct {
		ip     string
		v4, v6 int // 0: defaults
		name   string
		zone   string
	}{
		{"1.2.3.4", 0, 0, "4.3.2.1.in-addr.arpa.", "3.2.1.in-addr.arpa"},
		{"10.0.0.255", 0, 0, "255.0.0.10.in-addr.arpa.", "0.0.10.in-addr.arpa"},
		{"1.2.3.4", 24, 0, "4.3.2.1.in-addr.arpa.", "3.2.1.in-addr.arpa"},
		{"1.2.3.4", 16, 0, "4.3.2.1.in-addr.arpa.", "2.1.in-addr.arpa"},
		{"1.2.3.4", 8, 0, "4.3.2.1.in-addr.arpa.", "1.in-addr.arpa"},
		{"10.200.13.7", 8, 0, "7.13.200.10.in-addr.arpa.", "10.in-addr.arpa"},
		{"255.255.255.255", 16, 0, "255.255.255.255.in-addr.arpa.", "255.255.in-addr.arpa"},
		{"0.0.0.0", 8, 0, "0.0.0.0.in-addr.arpa.", "0.in-addr.arpa"},
		{"1.2.3.4", 12, 0, "4.3.2.1.in-addr.arpa.", "3.2.1.in-addr.arpa"}, // invalid: the default
		{"1.2.3.4", 0, 32, "4.3.2.1.in-addr.arpa.", "3.2.1.in-addr.arpa"}, // v6 setting leaves v4 alone
		// reference §1.2 and test/unit/utils.test.js
		{"2607:abcd:1234:defa::1", 0, 0,
			"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.a.f.e.d.4.3.2.1.d.c.b.a.7.0.6.2.ip6.arpa.",
			"a.f.e.d.4.3.2.1.d.c.b.a.7.0.6.2.ip6.arpa"},
		{"2001:db8::ff00:42:8329", 0, 0,
			"9.2.3.8.2.4.0.0.0.0.f.f.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.",
			"0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa"},
		{"2607:abcd:1234:defa::1", 8, 64,
			"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.a.f.e.d.4.3.2.1.d.c.b.a.7.0.6.2.ip6.arpa.",
			"a.f.e.d.4.3.2.1.d.c.b.a.7.0.6.2.ip6.arpa"},
		{"2607:abcd:1234:defa::1", 0, 48,
			"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.a.f.e.d.4.3.2.1.d.c.b.a.7.0.6.2.ip6.arpa.",
			"4.3.2.1.d.c.b.a.7.0.6.2.ip6.arpa"},
		{"2607:abcd:1234:defa::1", 0, 32,
			"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.a.f.e.d.4.3.2.1.d.c.b.a.7.0.6.2.ip6.arpa.",
			"d.c.b.a.7.0.6.2.ip6.arpa"},
		{"2607:abcd:1234:defa::1", 0, 56, // invalid: the default
			"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.a.f.e.d.4.3.2.1.d.c.b.a.7.0.6.2.ip6.arpa.",
			"a.f.e.d.4.3.2.1.d.c.b.a.7.0.6.2.ip6.arpa"},
	} {
		a := mustAddr(t, tc.ip)
		name, zone := reverseName(a, tc.v4, tc.v6)
		if name != tc.name || zone != tc.zone {
			t.Errorf("reverseName(%s, /%d, /%d) = %s in %s, want %s in %s", tc.ip, tc.v4, tc.v6, name, zone, tc.name, tc.zone)
		}
		if want, _ := dns.ReverseAddr(tc.ip); want != name {
			t.Errorf("reverseName(%s) = %s, miekg says %s", tc.ip, name, want)
		}
		if !dns.IsSubDomain(zone+".", name) || dns.CountLabel(name) == dns.CountLabel(zone+".") {
			t.Errorf("reverseName(%s): %s is not strictly below its zone %s", tc.ip, name, zone)
		}
	}
}

// The reverse zone size set in Config decides which zone each PTR lands in.
func TestComputeReversePrefix(t *testing.T) {
	for _, tc := range []struct {
		v4, v6    int
		wantZones []string
	}{
		{0, 0, []string{"0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa", "3.2.10.in-addr.arpa"}},
		{8, 48, []string{"0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa", "10.in-addr.arpa"}},
		{16, 32, []string{"2.10.in-addr.arpa", "8.b.d.0.1.0.0.2.ip6.arpa"}},
	} {
		cfg := &Config{UseAlias: true, Zones: []Zone{zone("foo", "*")}, ReverseV4Prefix: tc.v4, ReverseV6Prefix: tc.v6}
		vm := newVM(vmID, nics(nic("n1", "10.2.3.4/8", "2001:db8::1/64")))
		res := Compute(cfg, world(), Input{VM: vm, Owner: newUser(ownerID)})
		var zones []string
		for _, r := range res.Records {
			if r.RR.Header().Rrtype == dns.TypePTR {
				zones = append(zones, r.Zone)
			}
		}
		slices.Sort(zones)
		if !slices.Equal(zones, tc.wantZones) {
			t.Errorf("/%d /%d: PTRs in %q, want %q (problems %q)", tc.v4, tc.v6, zones, tc.wantZones, res.Problems)
		}
	}
}

func TestComputeNeverPanics(t *testing.T) {
	cfg := &Config{UseAlias: true, UseLogin: true, Zones: []Zone{zone("foo", "*")}}
	weird := []*dc.VM{
		{},
		{UUID: vmID, NICs: []dc.NIC{{}}},
		{UUID: vmID, State: "running", Tags: map[string]any{
			tagServices: map[string]any{"x": 1.0}, tagDisable: []any{false},
			tagReversePTR: 7.0, tagSmartDC: true,
		}, CustomerMetadata: map[string]any{metaStatus: []any{"up"}, metaACME: nil}},
	}
	for _, vm := range weird {
		Compute(cfg, nil, Input{VM: vm, Owner: &dc.User{}})
		Compute(cfg, &World{}, Input{VM: vm, Owner: newUser(ownerID, login("admin"))})
	}
	for _, res := range []Result{
		Compute(nil, nil, Input{VM: newVM(vmID), Owner: newUser(ownerID)}),
		Compute(cfg, nil, Input{Owner: newUser(ownerID)}),
		Compute(cfg, nil, Input{VM: newVM(vmID)}),
	} {
		if len(res.Problems) != 1 || len(res.Records) != 0 {
			t.Errorf("bad input gave %+v", res)
		}
	}
}

func TestComputeIsDeterministic(t *testing.T) {
	cfg := &Config{UseAlias: true, UseLogin: true, Zones: []Zone{zone("foo", "*"), zone("bar", ext)}}
	vm := newVM(vmID, alias("web"), services("a:1,b:2,c:3"), meta(metaACME, "x y z"),
		nics(nic(fabric, "10.0.0.1", "2001:db8::1"), nic(ext, "10.0.1.1", "10.0.1.2")))
	first := renderAll(Compute(cfg, fabricWorld(), Input{VM: vm, Owner: newUser(ownerID)}).Records)
	for range 20 {
		again := renderAll(Compute(cfg, fabricWorld(), Input{VM: vm, Owner: newUser(ownerID)}).Records)
		if !slices.Equal(first, again) {
			t.Fatalf("order changed:\n%q\n%q", first, again)
		}
	}
}
