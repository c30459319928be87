package records

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// Result.Clients: a listed instance's addresses on client_answers'
// networks (or pools); fabric addresses carry their subnet; nothing for
// an unlisted instance or without client networks.
func TestClientAddrs(t *testing.T) {
	const vmUUID, owner = "a1b2c3d4-0000-4000-8000-000000000001", "0f000000-0000-4000-8000-000000000001"
	fabric := &dc.Network{UUID: "fab", Name: "default", Subnet: "192.168.128.0/22", Fabric: true}
	badFabric := &dc.Network{UUID: "fab2", Name: "odd", Fabric: true}
	w := world(fabric, badFabric)
	w.Pools["ext2"] = []string{"pool"}
	all := nics(nic("ext", "10.0.0.5/24"), nic("ext2", "10.1.0.5"), nic("other", "10.2.0.5"),
		nic("fab", "192.168.128.5"), nic("fab2", "192.168.0.9"))
	cases := []struct {
		name    string
		clients []string
		user    *dc.User
		want    []string
	}{
		{"off", nil, newUser(owner), nil},
		{"network", []string{"EXT"}, newUser(owner), []string{"10.0.0.5"}},
		{"pool", []string{"pool"}, newUser(owner), []string{"10.1.0.5"}},
		{"fabric carries its subnet", []string{"fab"}, newUser(owner), []string{"192.168.128.5 via 192.168.128.0/22"}},
		{"fabric without subnet: none", []string{"fab2"}, newUser(owner), nil},
		{"owner not opted in: not listed", []string{"ext"}, newUser(owner, cnsEnabled("false")), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Zones: []Zone{zone("dc.example", "*")}, ClientNetworks: tc.clients}
			res := Compute(cfg, w, Input{VM: newVM(vmUUID, all), Owner: tc.user})
			var got []string
			for _, c := range res.Clients {
				s := c.Addr.String()
				if c.Fabric.IsValid() {
					s = fmt.Sprintf("%s via %s", s, c.Fabric)
				}
				got = append(got, s)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("clients %q, want %q", got, tc.want)
			}
			if wantZones := []string{"dc.example"}; len(tc.want) > 0 && !slices.Equal(res.ClientZones, wantZones) {
				t.Errorf("client zones %q, want %q", res.ClientZones, wantZones)
			}
		})
	}
}
