package feeds

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// factsCases are trimmed VMs as trimVM makes them: the example inventory's
// and the corners the encoding has to keep apart (nil against empty,
// absent against zero).
func factsCases(t *testing.T) []*dc.VM {
	t.Helper()
	inv, err := dc.LoadInventory("../testdata/inventory.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []*dc.VM
	for i := range inv.VMs {
		out = append(out, trimVM(&inv.VMs[i]))
	}
	alias, empty := "web-1", ""
	vlan0, vlanNeg, vlan := 0, -1, 4094
	out = append(out,
		&dc.VM{},
		&dc.VM{UUID: "not-a-uuid", OwnerUUID: "0123456G-082d-49e4-a9fd-cd5cb26da7ab", Alias: &empty, State: "running",
			NICs: []dc.NIC{}, Tags: map[string]any{}, CustomerMetadata: map[string]any{}},
		&dc.VM{UUID: "00058e63-082d-49e4-a9fd-cd5cb26da7ab", OwnerUUID: "3590efb5-2bb9-4367-9deb-c7c95a154295",
			ServerUUID: "5b26179a-3f91-4953-b3a9-272dbebea53b", Alias: &alias, State: "stopped", Docker: true,
			Destroyed: dc.Destroyed{Set: true, Time: "2026-11-24T04:27:29.681Z"}, LastModified: "2026-11-24T04:27:29Z",
			NICs: []dc.NIC{
				{IP: "10.0.0.5", IPs: []string{"10.0.0.5/24", "fd00::5/64"}, NetworkUUID: "c66bd90b-6e21-4a55-a4b5-18f6010c6b14", NICTag: "external", VLANID: &vlan},
				{IP: "192.168.1.9", IPs: []string{}, NetworkUUID: "not a uuid", VLANID: &vlan0},
				{VLANID: &vlanNeg},
			},
			Tags: map[string]any{"triton.cns.services": "web:8080,db", "triton.cns.disable": true, "triton.cns.reverse_ptr": false,
				"smartdc_role": 12.5, "manta_role": nil, "docker:label:triton.cns.services": []any{"a", 1.0, map[string]any{"b": true}}},
			CustomerMetadata: map[string]any{"triton.cns.grpc_config": `{"loadBalancingConfig":[]}`, "triton.cns.status": "down"}},
		&dc.VM{UUID: "00058e63-082d-49e4-a9fd-cd5cb26da7ab", Destroyed: dc.Destroyed{Set: true}},
	)
	return out
}

// Ensure the facts read back exactly as the JSON the updater used to hold
// read back, for every field records reads.
func TestFactsEncodingMatchesJSON(t *testing.T) {
	var binSize, jsonSize int
	for _, vm := range factsCases(t) {
		js, err := json.Marshal(vm)
		if err != nil {
			t.Fatal(err)
		}
		var fromJSON dc.VM
		if err := json.Unmarshal(js, &fromJSON); err != nil {
			t.Fatal(err)
		}
		bin, err := encodeFacts(nil, vm)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		fromBin, err := decodeFacts(bin)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		if !reflect.DeepEqual(fromBin, &fromJSON) {
			t.Errorf("facts and JSON read back differently:\n%#v\n%#v", fromBin, &fromJSON)
		}
		binSize += len(bin)
		jsonSize += len(js)
	}
	if binSize*2 > jsonSize {
		t.Errorf("facts %d bytes in all, JSON %d: want under half", binSize, jsonSize)
	}
	t.Logf("facts %d bytes in all, JSON %d", binSize, jsonSize)
}

// Ensure equal facts encode to equal bytes whatever order their maps were
// filled in (putVM's "unchanged" compares the bytes), and different
// values to different bytes.
func TestFactsEncodingIsCanonical(t *testing.T) {
	keys := []string{"triton.cns.services", "triton.cns.disable", "smartdc_role", "triton.cns.reverse_ptr", "manta_role"}
	fill := func(order []int, last any) map[string]any {
		m := map[string]any{}
		for _, i := range order {
			m[keys[i]] = "v" + keys[i]
		}
		m[keys[order[len(order)-1]]] = last
		return m
	}
	first, err := encodeFacts(nil, &dc.VM{UUID: "x", Tags: fill([]int{0, 1, 2, 3, 4}, "z")})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := encodeFacts(nil, &dc.VM{UUID: "x", Tags: fill([]int{3, 2, 0, 1, 4}, "z")})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("the same facts encoded twice differ:\n%x\n%x", first, again)
		}
	}
	for _, other := range []any{"y", true, nil, 1.0} {
		b, _ := encodeFacts(nil, &dc.VM{UUID: "x", Tags: fill([]int{0, 1, 2, 3, 4}, other)})
		if bytes.Equal(first, b) {
			t.Errorf("a tag value changed to %v, the facts did not", other)
		}
	}
}

// Ensure damaged facts are an error, not a panic or a wrong VM: every
// truncation, and every single octet changed to each of a few values.
func TestFactsDecodeRejectsDamage(t *testing.T) {
	for _, vm := range factsCases(t) {
		bin, err := encodeFacts(nil, vm)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(bin) {
			if _, err := decodeFacts(bin[:n]); err == nil {
				t.Errorf("%s: truncated to %d of %d octets: decoded", vm.UUID, n, len(bin))
			}
		}
		if _, err := decodeFacts(append(bin[:len(bin):len(bin)], 0)); err == nil {
			t.Errorf("%s: a trailing octet: decoded", vm.UUID)
		}
		for i := range bin {
			for _, x := range []byte{0, 1, 0x7f, 0xff} {
				damaged := bytes.Clone(bin)
				damaged[i] = x
				decodeFacts(damaged) // must not panic; many changes still decode
			}
		}
	}
}

// BenchmarkFacts: what the updater pays per VM to hold its facts and read
// them back (a first load does both once for every VM), in the field
// encoding and in the JSON it replaced, over the example inventory's VMs;
// it prints the ratio.
func BenchmarkFacts(b *testing.B) {
	inv, err := dc.LoadInventory("../testdata/inventory.json")
	if err != nil {
		b.Fatal(err)
	}
	vms := make([]*dc.VM, len(inv.VMs))
	for i := range inv.VMs {
		vms[i] = trimVM(&inv.VMs[i])
	}
	roundTrip := map[string]func(*dc.VM) error{
		"fields": func(vm *dc.VM) error {
			enc, err := encodeFacts(nil, vm)
			if err == nil {
				_, err = decodeFacts(enc)
			}
			return err
		},
		"json": func(vm *dc.VM) error {
			enc, err := json.Marshal(vm)
			if err == nil {
				err = json.Unmarshal(enc, new(dc.VM))
			}
			return err
		},
	}
	perVM := map[string]float64{}
	for _, name := range []string{"fields", "json"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				for _, vm := range vms {
					if err := roundTrip[name](vm); err != nil {
						b.Fatal(err)
					}
				}
			}
			perVM[name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N*len(vms))
			b.ReportMetric(perVM[name], "ns/vm")
			if name == "json" && perVM["fields"] > 0 {
				b.ReportMetric(perVM["json"]/perVM["fields"], "x_fields") // JSON's time over the encoding's
			}
		})
	}
}
