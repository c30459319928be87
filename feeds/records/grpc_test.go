package records

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/dc"
)

func TestParseServiceTagGRPCLB(t *testing.T) {
	p := func(port uint16) []Port { return []Port{{Port: port, Weight: 10}} }
	valid := []struct {
		tag  string
		want []Service
	}{
		{"api-lb:1234:grpclb=api", []Service{{Name: "api-lb", Ports: p(1234), Balances: []Balance{{"api", 1234}}}}},
		{"api-lb:grpclb=API:port=99", []Service{{Name: "api-lb", Ports: p(99), Balances: []Balance{{"api", 99}}}}},
		{"lb:1:grpclb=a:grpclb=b:grpclb=a", []Service{{Name: "lb", Ports: p(1), Balances: []Balance{{"a", 1}, {"b", 1}}}}},
		{"lb:1:grpclb=a,lb:2:grpclb=a,lb:1:grpclb=a", []Service{{Name: "lb", Ports: []Port{{Port: 1, Weight: 10}, {Port: 2, Weight: 10}},
			Balances: []Balance{{"a", 1}, {"a", 2}}}}},
		{"lb:1:grpclb=x.y,web:80", []Service{{Name: "lb", Ports: p(1), Balances: []Balance{{"x.y", 1}}}, {Name: "web", Ports: p(80)}}},
		{"lb:1:grpclb=_api._tcp", []Service{{Name: "lb", Ports: p(1), Balances: []Balance{{"_api._tcp", 1}}}}},
	}
	for _, tc := range valid {
		var pr problems
		got, err := parseServiceTag(tc.tag, &pr)
		if err != nil || !slices.EqualFunc(got, tc.want, func(a, b Service) bool {
			return a.Name == b.Name && slices.Equal(a.Ports, b.Ports) && slices.Equal(a.Balances, b.Balances)
		}) || len(pr.list) > 0 {
			t.Errorf("parseServiceTag(%q) = %+v, %v, problems %q; want %+v", tc.tag, got, err, pr.list, tc.want)
		}
	}
	invalid := []struct{ tag, why string }{
		{"api-lb:grpclb=api", "grpclb=api needs the balancer's port"},
		{"api-lb:grpclb=a..b:1", `grpclb=a..b: service name "a..b"`},
		{"api-lb:1:grpclb=a..b", `grpclb=a..b: service name "a..b": empty label`},
		{"api-lb:1:grpclb=-x", "starts or ends"},
		{"api-lb:1:grpclb=a_b", `has the character '_'`},
		{"api-lb:1:grpclb=" + strings.Repeat("x", 64), "longer than 63"},
		{"api-lb:1:grpclb=_x._sctp", "want _name._tcp or _name._udp"},
		{"api:1:grpclb=API", "grpclb=API: a balancer cannot balance for itself"},
		{"api:1:grpclb=", "is neither a port nor key=value"},
	}
	for _, tc := range invalid {
		var pr problems
		got, err := parseServiceTag(tc.tag, &pr)
		if err == nil || got != nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("parseServiceTag(%q) = %+v, %v; want an error saying %q", tc.tag, got, err, tc.why)
		}
	}
	// Through Compute: invalid_tag, no services, one problem.
	res := Compute(&Config{Zones: []Zone{zone("foo", ext)}}, fabricWorld(), Input{
		VM: newVM(vmID, services("api-lb:1234:grpclb=a..b"), nics(nic(ext, "10.0.0.1"))), Owner: newUser(ownerID)})
	if !slices.Equal(res.Reasons, []Reason{ReasonInvalidTag}) || res.Services != nil || len(res.Problems) != 1 ||
		!strings.Contains(res.Problems[0], "grpclb=a..b") {
		t.Errorf("reasons %q services %+v problems %q", res.Reasons, res.Services, res.Problems)
	}
}

// The balancer's members publish _grpclb._tcp.<target> SRV 0 0 <port>
// <balancer name> beside their own service records, in every zone and
// owner form they have names in, and only while listed in services.
func TestGRPCLBRecords(t *testing.T) {
	twoZones := Config{UseLogin: true, Zones: []Zone{zone("foo", "*"), zone("bar", ext)}}
	srv := []uint16{dns.TypeSRV}
	runRecordCases(t, []recordCase{{
		name:  "every zone, owner form and network variant",
		cfg:   twoZones,
		vm:    newVM(vmID, alias("lb0"), services("api-lb:1234:grpclb=api"), nics(nic(fabric, "1.2.3.4"), nic(ext, "5.6.7.8"))),
		owner: newUser(ownerID, login("bob")),
		types: srv,
		want: lines(
			foo.srv("api-lb.svc.def432", 0, 10, 1234, "abc123.inst.bob"),
			foo.srv("api-lb.svc.bob", 0, 10, 1234, "abc123.inst.bob"),
			foo.srv("default-fabric.api-lb.svc.def432", 0, 10, 1234, "abc123.inst.bob"),
			foo.srv("default-fabric.api-lb.svc.bob", 0, 10, 1234, "abc123.inst.bob"),
			foo.srv("_grpclb._tcp.api.svc.def432", 0, 0, 1234, "api-lb.svc.def432"),
			foo.srv("_grpclb._tcp.api.svc.bob", 0, 0, 1234, "api-lb.svc.bob"),
			foo.srv("_grpclb._tcp.default-fabric.api.svc.def432", 0, 0, 1234, "default-fabric.api-lb.svc.def432"),
			foo.srv("_grpclb._tcp.default-fabric.api.svc.bob", 0, 0, 1234, "default-fabric.api-lb.svc.bob"),
			bar.srv("api-lb.svc.def432", 0, 10, 1234, "abc123.inst.bob"),
			bar.srv("api-lb.svc.bob", 0, 10, 1234, "abc123.inst.bob"),
			bar.srv("_grpclb._tcp.api.svc.def432", 0, 0, 1234, "api-lb.svc.def432"),
			bar.srv("_grpclb._tcp.api.svc.bob", 0, 0, 1234, "api-lb.svc.bob"),
		),
	}, {
		name:  "priority and weight of the balancer's own SRV do not reach the grpclb SRV",
		cfg:   Config{Zones: []Zone{zone("foo", ext)}},
		vm:    newVM(vmID, services("lb:1234:priority=5:weight=7:grpclb=api:grpclb=web,lb:99:grpclb=api"), nics(nic(ext, "1.2.3.4"))),
		types: srv,
		want: lines(
			foo.srv("lb.svc.def432", 5, 7, 1234, "abc123.inst.def432"),
			foo.srv("lb.svc.def432", 0, 10, 99, "abc123.inst.def432"),
			foo.srv("_grpclb._tcp.api.svc.def432", 0, 0, 1234, "lb.svc.def432"),
			foo.srv("_grpclb._tcp.api.svc.def432", 0, 0, 99, "lb.svc.def432"),
			foo.srv("_grpclb._tcp.web.svc.def432", 0, 0, 1234, "lb.svc.def432"),
		),
	}, {
		name:  "balancer down: no grpclb SRV",
		cfg:   Config{Zones: []Zone{zone("foo", ext)}},
		vm:    newVM(vmID, meta(metaStatus, "down"), services("lb:1234:grpclb=api"), nics(nic(ext, "1.2.3.4"))),
		types: srv,
		want:  nil,
	}, {
		name:  "admin balancer: only under svc names, not the bare name",
		cfg:   Config{Zones: []Zone{zone("foo", ext)}},
		vm:    newVM(vmID, services("lb:1234:grpclb=api"), nics(nic(ext, "1.2.3.4"))),
		owner: newUser(ownerID, login("admin")),
		types: srv,
		want: lines(
			foo.srv("lb.svc.def432", 0, 10, 1234, "abc123.inst.def432"),
			foo.srv("_grpclb._tcp.api.svc.def432", 0, 0, 1234, "lb.svc.def432"),
		),
	}})

	// A held balancer keeps its SRV.
	res := Compute(&Config{Zones: []Zone{zone("foo", ext)}}, fabricWorld(), Input{
		VM:    newVM(vmID, meta(metaStatus, "down"), services("lb:1234:grpclb=api"), nics(nic(ext, "1.2.3.4"))),
		Owner: newUser(ownerID), HeldServices: []string{"lb"},
	})
	sameSet(t, "held balancer", renderAll(res.Records, dns.TypeSRV), lines(
		foo.srv("lb.svc.def432", 0, 10, 1234, "abc123.inst.def432"),
		foo.srv("_grpclb._tcp.api.svc.def432", 0, 0, 1234, "lb.svc.def432"),
	))
}

func TestCheckGRPCConfig(t *testing.T) {
	valid := []struct{ in, want string }{
		{`[{"serviceConfig":{}}]`, `[{"serviceConfig":{}}]`},
		{" [ {\n \"serviceConfig\" : { \"loadBalancingConfig\" : [ {\"round_robin\":{}} ] } } ] ",
			`[{"serviceConfig":{"loadBalancingConfig":[{"round_robin":{}}]}}]`},
		{`[{"clientLanguage":["go","c++"],"percentage":100,"clientHostname":["h1"],"serviceConfig":{"loadBalancingPolicy":"round_robin"}},{"percentage":0,"serviceConfig":{}}]`, ""},
		{`[{"serviceConfig":{"methodConfig":[{"name":[{"service":"grpc.health.v1.Health"},{"service":"x","method":"Y"}],` +
			`"timeout":"1.5s","waitForReady":true,"maxRequestMessageBytes":1024,"retryPolicy":{"maxAttempts":3}}],` +
			`"retryThrottling":{"maxTokens":10,"tokenRatio":0.1},"healthCheckConfig":{"serviceName":""},"someFutureField":[1]}}]`, ""},
		{`[{"serviceConfig":{"loadBalancingConfig":[{"grpclb":{"childPolicy":[{"pick_first":{}}]}}]}}]`, ""},
		{`[{"percentage":7,"serviceConfig":{"note":"quotes \" and backslashes \\ pass"}}]`, ""},
	}
	for _, tc := range valid {
		got, err := checkGRPCConfig(tc.in)
		want := tc.want
		if want == "" {
			want = tc.in
		}
		if err != nil || got != want {
			t.Errorf("checkGRPCConfig(%s) = %s, %v; want %s", tc.in, got, err, want)
		}
	}
	invalid := []struct{ in, why string }{
		{``, "not JSON"},
		{`[{"serviceConfig":{}}`, "not JSON"},
		{`{"serviceConfig":{}}`, "want a list of service config choices"},
		{`{"loadBalancingConfig":[{"round_robin":{}}]}`, "got an object"},
		{`"x"`, "got a string"},
		{`[]`, "no service config choice"},
		{`[1]`, "choice 1: want an object, got a number"},
		{`[{"serviceConfig":{}},{}]`, "choice 2: no serviceConfig"},
		{`[{"serviceConfig":[]}]`, "serviceConfig: want an object, got an array"},
		{`[{"serviceConfig":null}]`, "serviceConfig: want an object, got null"},
		{`[{"serviceConfig":{},"clientHostName":["h"]}]`, `clientHostName: unknown field`},
		{`[{"serviceConfig":{},"percentage":101}]`, "percentage: want an integer in 0-100, got 101"},
		{`[{"serviceConfig":{},"percentage":50.5}]`, "percentage"},
		{`[{"serviceConfig":{},"percentage":"50"}]`, "percentage"},
		{`[{"serviceConfig":{},"percentage":-1}]`, "percentage"},
		{`[{"serviceConfig":{},"percentage":05}]`, "not JSON"},
		{`[{"serviceConfig":{},"clientLanguage":"go"}]`, "clientLanguage: want a list of strings, got a string"},
		{`[{"serviceConfig":{},"clientLanguage":["go",1]}]`, "clientLanguage: want a string, got a number"},
		{`[{"serviceConfig":{"loadBalancingPolicy":1}}]`, "loadBalancingPolicy: want a string, got a number"},
		{`[{"serviceConfig":{"loadBalancingConfig":{"round_robin":{}}}}]`, "loadBalancingConfig: want a list, got an object"},
		{`[{"serviceConfig":{"loadBalancingConfig":[{"round_robin":{},"pick_first":{}}]}}]`, "entry 1: want one policy name per entry, got 2"},
		{`[{"serviceConfig":{"loadBalancingConfig":[{"round_robin":[]}]}}]`, "entry 1: round_robin: want an object, got an array"},
		{`[{"serviceConfig":{"loadBalancingConfig":["round_robin"]}}]`, "entry 1: want an object, got a string"},
		{`[{"serviceConfig":{"methodConfig":[{"timeout":"1m"}]}}]`, `methodConfig: entry 1: timeout: want a duration such as "1.5s", got "1m"`},
		{`[{"serviceConfig":{"methodConfig":[{"timeout":1}]}}]`, "timeout"},
		{`[{"serviceConfig":{"methodConfig":[{"name":[{"service":1}]}]}}]`, "name: entry 1: service: want a string"},
		{`[{"serviceConfig":{"methodConfig":[{"waitForReady":"yes"}]}}]`, "waitForReady: want a boolean"},
		{`[{"serviceConfig":{"methodConfig":[{"maxResponseMessageBytes":1.5}]}}]`, "maxResponseMessageBytes: want a byte count"},
		{`[{"serviceConfig":{"methodConfig":[{"retryPolicy":true}]}}]`, "retryPolicy: want an object"},
		{`[{"serviceConfig":{"retryThrottling":[]}}]`, "retryThrottling: want an object"},
		{`[{"serviceConfig":{"x":"é"}}]`, "not printable ASCII"},
		{`[{"serviceConfig":{"x":"` + strings.Repeat("y", maxGRPCConfig) + `"}}]`, "more than 4096"},
	}
	for _, tc := range invalid {
		got, err := checkGRPCConfig(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("checkGRPCConfig(%.60s) = %q, %v; want an error saying %q", tc.in, got, err, tc.why)
		}
	}
	// The limit counts compacted octets: white space does not count.
	big := `[{"serviceConfig":{"x":"` + strings.Repeat("y", maxGRPCConfig-len(`[{"serviceConfig":{"x":""}}]`)) + `"}}]`
	if _, err := checkGRPCConfig(strings.ReplaceAll(big, ":", " :\n\t ")); err != nil {
		t.Errorf("a config of exactly %d octets: %v", maxGRPCConfig, err)
	}
}

// The TXT strings are at most 255 octets, concatenate to grpc_config=
// and the compact JSON, and survive the wire unchanged.
func TestGRPCConfigTXT(t *testing.T) {
	for _, n := range []int{0, 1, 200, 243, 244, 500, 1000, maxGRPCConfig - 80} {
		cfg := fmt.Sprintf(`[{"serviceConfig":{"loadBalancingConfig":[{"round_robin":{}}],"x":"%s"}}]`,
			strings.Repeat(`a\"\\`, n/5)+strings.Repeat("b", n%5))
		compact, err := checkGRPCConfig(cfg)
		if err != nil {
			t.Fatalf("%d: %v", n, err)
		}
		rr := &dns.TXT{Hdr: header("_grpc_config.x.", dns.TypeTXT), Txt: txtStrings(grpcConfigAttr + compact)}
		buf := make([]byte, 1<<16)
		off, err := dns.PackRR(rr, buf, 0, nil, false)
		if err != nil {
			t.Fatalf("%d: pack: %v", n, err)
		}
		back, _, err := dns.UnpackRR(buf[:off], 0)
		if err != nil {
			t.Fatalf("%d: unpack: %v", n, err)
		}
		if back.String() != rr.String() {
			t.Errorf("%d: the wire changed the record:\n%s\n%s", n, rr, back)
		}
		// Decode the strings as a resolver does: length-prefixed octets.
		rd := buf[off-int(rr.Hdr.Rdlength) : off]
		var joined strings.Builder
		for len(rd) > 0 {
			l := int(rd[0])
			if l > 255 || l+1 > len(rd) {
				t.Fatalf("%d: bad string length %d", n, l)
			}
			if l != 255 && len(rd) > l+1 {
				t.Errorf("%d: a short string (%d) before the last", n, l)
			}
			joined.Write(rd[1 : 1+l])
			rd = rd[1+l:]
		}
		if joined.String() != grpcConfigAttr+compact {
			t.Errorf("%d: the strings join to\n%s\nwant\n%s", n, joined.String(), grpcConfigAttr+compact)
		}
	}
}

// Members publish the service config at _grpc_config.<svc> for every
// service and name form, stamped with last_modified; an invalid config
// publishes nothing and says why.
func TestGRPCConfigRecords(t *testing.T) {
	const sc = `[{"serviceConfig":{"loadBalancingConfig":[{"round_robin":{}}]}}]`
	cfg := &Config{UseLogin: true, Zones: []Zone{zone("foo", "*"), zone("bar", ext)}}
	lm := func(s string) vmOpt { return func(vm *dc.VM) { vm.LastModified = s } }
	member := func(opts ...vmOpt) *dc.VM {
		return newVM(vmID, append([]vmOpt{services("api:8080,web"), nics(nic(fabric, "1.2.3.4"), nic(ext, "5.6.7.8"))}, opts...)...)
	}
	txt := func(zn z, rel string) string {
		return zn.rr("_grpc_config."+rel, "TXT", `"grpc_config=[{\"serviceConfig\":{\"loadBalancingConfig\":[{\"round_robin\":{}}]}}]"`)
	}
	all := lines(
		txt(foo, "api.svc.def432"), txt(foo, "api.svc.bob"), txt(foo, "default-fabric.api.svc.def432"), txt(foo, "default-fabric.api.svc.bob"),
		txt(foo, "web.svc.def432"), txt(foo, "web.svc.bob"), txt(foo, "default-fabric.web.svc.def432"), txt(foo, "default-fabric.web.svc.bob"),
		txt(bar, "api.svc.def432"), txt(bar, "api.svc.bob"), txt(bar, "web.svc.def432"), txt(bar, "web.svc.bob"),
	)
	cases := []struct {
		name      string
		vm        *dc.VM
		held      []string
		want      []string
		wantStamp uint64
		problems  []string
	}{
		{"every service and form", member(meta(metaGRPCConfig, sc), lm("2025-05-21T09:20:40.112Z")), nil, all, 1747819240112, nil},
		{"no last_modified: oldest", member(meta(metaGRPCConfig, sc)), nil, all, 1, nil},
		{"bad last_modified: oldest", member(meta(metaGRPCConfig, sc), lm("yesterday")), nil, all, 1,
			[]string{`last_modified "yesterday" is not a time`}},
		{"status down: none", member(meta(metaGRPCConfig, sc), meta(metaStatus, "down")), nil, nil, 0, nil},
		{"held in api: api only", member(meta(metaGRPCConfig, sc), meta(metaStatus, "down")), []string{"api"}, lines(
			txt(foo, "api.svc.def432"), txt(foo, "api.svc.bob"), txt(foo, "default-fabric.api.svc.def432"), txt(foo, "default-fabric.api.svc.bob"),
			txt(bar, "api.svc.def432"), txt(bar, "api.svc.bob")), 1, nil},
		{"invalid: none", member(meta(metaGRPCConfig, `{"loadBalancingConfig":[]}`)), nil, nil, 0,
			[]string{"metadata triton.cns.grpc_config: want a list of service config choices"}},
		{"not a string", member(meta(metaGRPCConfig, []any{})), nil, nil, 0,
			[]string{"metadata triton.cns.grpc_config []: want a string, got an array: no _grpc_config record"}},
		{"in no service", newVM(vmID, meta(metaGRPCConfig, sc), nics(nic(ext, "5.6.7.8"))), nil, nil, 0,
			[]string{"the VM is in no service"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Compute(cfg, fabricWorld(), Input{VM: tc.vm, Owner: newUser(ownerID, login("bob")), HeldServices: tc.held})
			var got []Record
			for _, r := range res.Records {
				if strings.HasPrefix(r.RR.Header().Name, "_grpc_config.") {
					got = append(got, r)
				}
				if r.Stamp != 0 && !strings.HasPrefix(r.RR.Header().Name, "_grpc_config.") {
					t.Errorf("stamped %s", r.RR)
				}
			}
			sameSet(t, "_grpc_config records", renderAll(got), tc.want)
			for _, r := range got {
				if r.Stamp != tc.wantStamp || r.Pref != 0 {
					t.Errorf("%s: stamp %d pref %d, want stamp %d", r.RR.Header().Name, r.Stamp, r.Pref, tc.wantStamp)
				}
			}
			checkProblems(t, res.Problems, tc.problems)
			checkOrder(t, res.Records)
		})
	}
	// Valid configs that grpc-go reads differently than one would think
	// are published with a hint.
	for in, want := range map[string][]string{
		`[{"clientLanguage":["GO"],"serviceConfig":{}}]`:                                                      nil,
		`[{"clientLanguage":[],"serviceConfig":{}}]`:                                                          nil,
		`[{"clientLanguage":["java"],"serviceConfig":{}},{"serviceConfig":{}}]`:                               nil,
		`[{"clientLanguage":["go"],"serviceConfig":{}},{"serviceConfig":{}}]`:                                 {`choice 1: clientLanguage "go": grpc-go selects only "GO"`},
		`[{"clientLanguage":["java","Go"],"serviceConfig":{}},{"clientLanguage":["c++"],"serviceConfig":{}}]`: {`choice 1: clientLanguage "Go": grpc-go selects only "GO"`, `no choice for grpc-go`},
	} {
		res := Compute(cfg, fabricWorld(), Input{VM: member(meta(metaGRPCConfig, in)), Owner: newUser(ownerID)})
		var got []string
		for _, r := range res.Records {
			if strings.HasPrefix(r.RR.Header().Name, "_grpc_config.") {
				got = append(got, r.RR.Header().Name)
			}
		}
		if len(got) == 0 {
			t.Errorf("%s: not published", in)
		}
		checkProblems(t, res.Problems, want)
	}
	if NeedsLastModified(newVM(vmID)) || !NeedsLastModified(member(meta(metaGRPCConfig, "x"))) {
		t.Error("NeedsLastModified")
	}
}
