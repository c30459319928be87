package records

import (
	"slices"
	"strings"
	"testing"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestParseServiceTag(t *testing.T) {
	p := func(port, prio, weight uint16) Port { return Port{Port: port, Priority: prio, Weight: weight} }
	valid := []struct {
		tag  string
		want []Service
	}{
		{"foo", []Service{{Name: "foo"}}},
		{"Foo", []Service{{Name: "foo"}}},
		{"foo,bar,test", []Service{{Name: "foo"}, {Name: "bar"}, {Name: "test"}}},
		{"foo:1234,foo:1235", []Service{{Name: "foo", Ports: []Port{p(1234, 0, 10), p(1235, 0, 10)}}}},
		{"foo:1234,foo:1234", []Service{{Name: "foo", Ports: []Port{p(1234, 0, 10)}}}},
		{"foo:1234:test=something,bar", []Service{{Name: "foo", Ports: []Port{p(1234, 0, 10)}}, {Name: "bar"}}},
		{"web:443:priority=5:weight=20", []Service{{Name: "web", Ports: []Port{p(443, 5, 20)}}}},
		{"web:443:weight=0:priority=65535", []Service{{Name: "web", Ports: []Port{p(443, 65535, 0)}}}},
		{"web:port=8080", []Service{{Name: "web", Ports: []Port{p(8080, 0, 10)}}}},
		{"web:443:port=80", []Service{{Name: "web", Ports: []Port{p(80, 0, 10)}}}},
		{"web:priority=1", []Service{{Name: "web"}}},
		{"web:1:x-y=a b=c", []Service{{Name: "web", Ports: []Port{p(1, 0, 10)}}}},
		{"web:65535", []Service{{Name: "web", Ports: []Port{p(65535, 0, 10)}}}},
		{"_HTTP._TCP:80", []Service{{Name: "_http._tcp", Ports: []Port{p(80, 0, 10)}}}},
		{"_sip._udp:5060", []Service{{Name: "_sip._udp", Ports: []Port{p(5060, 0, 10)}}}},
		{"a.b.c:1", []Service{{Name: "a.b.c", Ports: []Port{p(1, 0, 10)}}}},
		{"1up", []Service{{Name: "1up"}}},
		{strings.Repeat("x", 63), []Service{{Name: strings.Repeat("x", 63)}}},
	}
	for _, tc := range valid {
		var pr problems
		got, err := parseServiceTag(tc.tag, &pr)
		if err != nil || !slices.EqualFunc(got, tc.want, func(a, b Service) bool {
			return a.Name == b.Name && slices.Equal(a.Ports, b.Ports)
		}) {
			t.Errorf("parseServiceTag(%q) = %+v, %v; want %+v", tc.tag, got, err, tc.want)
		}
		if len(pr.list) > 0 {
			t.Errorf("parseServiceTag(%q): problems %q", tc.tag, pr.list)
		}
	}

	// Every one of these is invalid_tag; the error names the culprit.
	invalid := []struct{ tag, why string }{
		{"", "empty"},
		{":", "empty label"},
		{"a..b", `service name "a..b": empty label`},
		{"c.", `service name "c.": empty label`},
		{".c", "empty label"},
		{"-", `label "-" starts or ends with "-"`},
		{"-foo", "starts or ends"},
		{"foo-", "starts or ends"},
		{"foo.-bar", "starts or ends"},
		{strings.Repeat("x", 64), "longer than 63 octets"},
		{strings.Repeat("abcdefghi.", 25) + "abcd", "longer than 253 octets"},
		{"foo bar", `has the character ' '`},
		{"foo_bar", `has the character '_'`},
		{"foo, bar", `service 2 " bar"`},
		{"foo,", `service 2 ""`},
		{",foo", `service 1 ""`},
		{"foo:", `"" is neither a port nor key=value`},
		{"foo:0", `port "0" is not a number in 1-65535`},
		{"foo:65536", `port "65536" is not a number in 1-65535`},
		{"foo:99999999999999999999", "port"},
		{"foo:80:81", `"81" is neither a port nor key=value`},
		{"foo:priority=1:80", `"80" is neither`},
		{"foo:80:priority=65536", `priority "65536" is not a number in 0-65535`},
		{"foo:80:weight=-1", `weight "-1"`},
		{"foo:80:weight=+1", `weight "+1"`},
		{"foo:80:weight=x", `weight "x"`},
		{"foo:80:port=0", `port "0"`},
		{"foo:Priority=1", `"Priority=1" is neither`},
		{"foo:1key=1", "is neither"},
		{"foo:key=", "is neither"},
		{"foo:=1", "is neither"},
		{"_http._tcpx", "want _name._tcp or _name._udp"},
		{"_http", "want _name._tcp or _name._udp"},
		{"_http._tcp.foo", "want _name._tcp or _name._udp"},
		{"_._tcp", `"_" is not "_" and a label`},
		{"_-x._tcp", "is not"},
		{"_a_b._tcp", "is not"},
		{"_" + strings.Repeat("x", 63) + "._tcp", "is not"},
	}
	for _, tc := range invalid {
		var pr problems
		got, err := parseServiceTag(tc.tag, &pr)
		if err == nil || got != nil {
			t.Errorf("parseServiceTag(%q) = %+v, %v; want an error", tc.tag, got, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.why) {
			t.Errorf("parseServiceTag(%q): error %q does not say %q", tc.tag, err, tc.why)
		}
	}
}

// An invalid tag, whatever is wrong with it, gives invalid_tag, no
// services and one problem, and the VM is otherwise listed as usual.
func TestInvalidServiceTagReason(t *testing.T) {
	cfg := &Config{Zones: []Zone{zone("foo", ext)}}
	for _, tag := range []string{"a..b", "c.", "-", "foo:0", "foo:80:priority=70000", "foo:80:weight=x", "_x._sctp"} {
		res := Compute(cfg, fabricWorld(), Input{
			VM:    newVM(vmID, services(tag), nics(nic(ext, "10.0.0.1"))),
			Owner: newUser(ownerID),
		})
		if !slices.Equal(res.Reasons, []Reason{ReasonInvalidTag}) || res.Services != nil ||
			!res.ListInstance || !res.ListServices || len(res.Problems) != 1 ||
			!strings.Contains(res.Problems[0], "tag triton.cns.services") {
			t.Errorf("tag %q: reasons %q services %+v problems %q", tag, res.Reasons, res.Services, res.Problems)
		}
		for _, r := range res.Records {
			if strings.Contains(r.RR.Header().Name, ".svc.") {
				t.Errorf("tag %q: service record %s", tag, r.RR)
			}
		}
	}
}

func TestConflictingPortIsReported(t *testing.T) {
	var pr problems
	got, err := parseServiceTag("web:80:priority=1,web:80:priority=2", &pr)
	if err != nil || len(got) != 1 || len(got[0].Ports) != 1 || got[0].Ports[0].Priority != 1 {
		t.Fatalf("got %+v, %v", got, err)
	}
	if len(pr.list) != 1 || !strings.Contains(pr.list[0], "port 80 given twice") {
		t.Errorf("problems %q", pr.list)
	}
}

// The parser and Compute take any tag text without panicking, and what
// the parser accepts is always valid.
func FuzzServiceTag(f *testing.F) {
	for _, s := range []string{"", ":", "foo", "foo:80:priority=1:weight=2,bar", "_http._tcp:80", "a..b", "x:99999", "é,:=", "foo:a=b=c"} {
		f.Add(s)
	}
	cfg := &Config{UseAlias: true, UseLogin: true, Zones: []Zone{zone("foo", "*")}}
	f.Fuzz(func(t *testing.T, tag string) {
		var pr problems
		svcs, err := parseServiceTag(tag, &pr)
		for _, s := range svcs {
			if checkServiceName(s.Name) != nil || err != nil {
				t.Fatalf("%q gave invalid service %+v (err %v)", tag, s, err)
			}
			for _, p := range s.Ports {
				if p.Port == 0 {
					t.Fatalf("%q gave port 0", tag)
				}
			}
		}
		Compute(cfg, fabricWorld(), Input{
			VM: newVM(vmID, alias(tag), services(tag), meta(metaACME, tag), meta(metaStatus, tag), meta(metaGRPCConfig, tag),
				nics(nic(fabric, tag, "10.0.0.1"))),
			Owner: newUser(ownerID, login(tag)),
		})
	})
}
