package records

import (
	"slices"
	"testing"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// The reference's test/unit/net-filter.test.js, plus pools and the NIC
// tags it refuses. Config order is the order of Zones.
func TestNetFilter(t *testing.T) {
	vlan0, vlan3 := 0, 3
	pools := &World{Pools: map[string][]string{
		"abc123": {"pool1", "pool2"},
	}}
	cases := []struct {
		name  string
		zones []Zone
		world *World
		nic   dc.NIC
		want  []string
	}{
		{"no match", []Zone{zone("foo", "abc123")}, nil,
			dc.NIC{NetworkUUID: "1234aaa"}, nil},
		{"exact uuid match", []Zone{zone("foo", "abc123")}, nil,
			dc.NIC{NetworkUUID: "abc123"}, []string{"foo"}},
		{"multiple exact uuid match", []Zone{zone("foo", "abc123"), zone("bar", "abc123"), zone("foobar", "def123")}, nil,
			dc.NIC{NetworkUUID: "abc123"}, []string{"foo", "bar"}},
		{"multiple exact uuid match, second NIC", []Zone{zone("foo", "abc123"), zone("bar", "abc123"), zone("foobar", "def123")}, nil,
			dc.NIC{NetworkUUID: "def123"}, []string{"foobar"}},
		{"wildcard match", []Zone{zone("foo", "abc123"), zone("bar", "*")}, nil,
			dc.NIC{NetworkUUID: "abc1234"}, []string{"bar"}},
		{"wildcard does not match if an exact is present", []Zone{zone("foo", "abc123"), zone("bar", "*")}, nil,
			dc.NIC{NetworkUUID: "abc123"}, []string{"foo"}},
		{"wildcard does not match if an exact is present after", []Zone{zone("bar", "*"), zone("foo", "abc123")}, nil,
			dc.NIC{NetworkUUID: "abc123"}, []string{"foo"}},
		{"multiple wildcards", []Zone{zone("bar", "*"), zone("foo", "abc123"), zone("derp", "*")}, nil,
			dc.NIC{NetworkUUID: "def123"}, []string{"bar", "derp"}},
		{"refuses admin network", []Zone{zone("foo", "abc123")}, nil,
			dc.NIC{NetworkUUID: "abc123", NICTag: "admin", VLANID: &vlan0}, nil},

		{"refuses admin network without vlan_id", []Zone{zone("foo", "*")}, nil,
			dc.NIC{NetworkUUID: "abc123", NICTag: "admin"}, nil},
		{"refuses rack-aware admin network", []Zone{zone("foo", "*")}, nil,
			dc.NIC{NetworkUUID: "abc123", NICTag: "admin_rack_R1-2"}, nil},
		{"takes a tagged VLAN on the admin NIC tag", []Zone{zone("foo", "*")}, nil,
			dc.NIC{NetworkUUID: "abc123", NICTag: "admin", VLANID: &vlan3}, []string{"foo"}},
		{"takes admin-like tags that are not admin", []Zone{zone("foo", "*")}, nil,
			dc.NIC{NetworkUUID: "abc123", NICTag: "administration"}, []string{"foo"}},
		{"refuses manta network, tagged or not", []Zone{zone("foo", "*")}, nil,
			dc.NIC{NetworkUUID: "abc123", NICTag: "Manta_rack_a1", VLANID: &vlan3}, nil},
		{"pool match", []Zone{zone("foo", "pool2"), zone("bar", "*")}, pools,
			dc.NIC{NetworkUUID: "abc123"}, []string{"foo"}},
		// The reference added "foo" twice here: duplicate A records.
		{"network and its pool in one zone: once", []Zone{zone("foo", "abc123", "pool1", "pool2")}, pools,
			dc.NIC{NetworkUUID: "abc123"}, []string{"foo"}},
		{"no network uuid: wildcards only", []Zone{zone("foo", ""), zone("bar", "*")}, pools,
			dc.NIC{}, []string{"bar"}},
		{"uuids compare in any case", []Zone{zone("foo", "ABC123")}, nil,
			dc.NIC{NetworkUUID: "abc123"}, []string{"foo"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Zones: tc.zones}
			var got []string
			for _, i := range nicZones(cfg, tc.world, &tc.nic) {
				got = append(got, cfg.Zones[i].Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("zones %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCleanLabel(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"Default-Fabric", "default-fabric", ""},
		{"SDC-Customer-Public-Pool-72.2.118.0/23", "sdc-customer-public-pool-72-2-118-0-23", ""},
		{"_foo", "foo", ""},
		{"my web server!", "my-web-server", ""},
		{"web--1", "web--1", ""},
		{"héllo wörld", "h-llo-w-rld", ""},
		{"---", "", "has no letters or digits"},
		{"", "", "has no letters or digits"},
		{"日本", "", "has no letters or digits"},
		{"a234567890123456789012345678901234567890123456789012345678901234", "", "longer than 63 octets"},
	} {
		got, err := cleanLabel(tc.in)
		if got != tc.want || (err == nil) != (tc.err == "") ||
			(err != nil && !contains(err.Error(), tc.err)) {
			t.Errorf("cleanLabel(%q) = %q, %v; want %q, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}
