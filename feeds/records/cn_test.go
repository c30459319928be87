package records

import (
	"slices"
	"strings"
	"testing"

	"github.com/tritondatacenter/cns/feeds/dc"
)

func TestComputeNode(t *testing.T) {
	const cn = "44454C4C-4800-1034-804A-B2C04F354D31"
	lower := strings.ToLower(cn)
	zones := Config{Zones: []Zone{zone("foo", "aaaaaa"), zone("bar", "*"), zone("baz")}}
	stale := "2021-03-14T09:26:53.589Z"
	for _, tc := range []struct {
		name   string
		server dc.Server
		want   []string
		// problem is a substring of the one expected problem, "" for none.
		problem string
	}{
		{"set up: a CMON name in every forward zone, whatever its NICs and networks",
			dc.Server{UUID: cn, Hostname: "cn07", Setup: true, Status: "running"},
			[]string{z("foo").cmon(lower), z("bar").cmon(lower), z("baz").cmon(lower)}, ""},
		{"whatever its running state: a CN silent for years keeps its names",
			dc.Server{UUID: cn, Setup: true, Status: "unknown", LastHeartbeat: &stale},
			[]string{z("foo").cmon(lower), z("bar").cmon(lower), z("baz").cmon(lower)}, ""},
		{"another admin NIC tag: no admin network needed",
			dc.Server{UUID: cn, Setup: true, Sysinfo: map[string]any{"Admin NIC Tag": "admin_rack_7"}},
			[]string{z("foo").cmon(lower), z("bar").cmon(lower), z("baz").cmon(lower)}, ""},
		{"not set up: none", dc.Server{UUID: cn, Status: "running"}, nil, "not set up"},
		{"uuid not a label: none", dc.Server{UUID: "-x", Setup: true}, nil, "server uuid"},
	} {
		res := ComputeNode(&zones, &tc.server)
		sameSet(t, tc.name, renderAll(res.Records), tc.want)
		if !slices.Equal(res.Reasons, []Reason{ReasonComputeNode}) || res.ListInstance || res.ListServices || len(res.Names) != 0 {
			t.Errorf("%s: decision %+v", tc.name, res)
		}
		switch {
		case tc.problem == "" && len(res.Problems) != 0:
			t.Errorf("%s: problems %q", tc.name, res.Problems)
		case tc.problem != "" && (len(res.Problems) != 1 || !strings.Contains(res.Problems[0], tc.problem)):
			t.Errorf("%s: problems %q, want one about %q", tc.name, res.Problems, tc.problem)
		}
	}
}
