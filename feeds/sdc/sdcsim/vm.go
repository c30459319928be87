package sdcsim

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// vmRecord is one VM of the world: the typed object mutations work on, and
// its rendering as VMAPI puts it on the wire, kept so that lists are a
// concatenation and diffs a tree walk.
type vmRecord struct {
	vm   dc.VM
	doc  map[string]any // rendered JSON as generic values, numbers kept exact
	wire []byte         // rendered JSON bytes
}

func newVMRecord(vm dc.VM) *vmRecord {
	doc, wire := renderVM(&vm)
	return &vmRecord{vm: vm, doc: doc, wire: wire}
}

// renderVM turns a VM into VMAPI's wire form, key by key in the layout
// of translateVm (sdc-vmapi lib/common/vm-common.js; sdc-apis §1.3): the
// always-present keys, null when unset, collections defaulting to {} or
// []; docker only when true; each NIC as vmadm reports it. The keys are
// written out here rather than taken from dc.VM's JSON tags, so that a
// wrong tag in the client's type cannot agree with itself: the simulator
// speaks VMAPI's field names, whatever the client expects.
func renderVM(vm *dc.VM) (map[string]any, []byte) {
	nics := make([]any, 0, len(vm.NICs))
	for i := range vm.NICs {
		nics = append(nics, renderVMNIC(&vm.NICs[i]))
	}
	wire := map[string]any{
		"uuid":                vm.UUID,
		"alias":               vm.Alias,
		"autoboot":            nil,
		"brand":               orNull(vm.Brand),
		"billing_id":          nil,
		"cpu_cap":             nil,
		"cpu_shares":          nil,
		"create_timestamp":    orNull(vm.CreateTimestamp),
		"customer_metadata":   orEmpty(vm.CustomerMetadata),
		"datasets":            []any{},
		"destroyed":           renderDestroyed(vm.Destroyed),
		"firewall_enabled":    false,
		"internal_metadata":   orEmpty(vm.InternalMetadata),
		"last_modified":       orNull(vm.LastModified),
		"limit_priv":          nil,
		"max_locked_memory":   nil,
		"max_lwps":            nil,
		"max_physical_memory": nil,
		"max_swap":            nil,
		"nics":                nics,
		"owner_uuid":          orNull(vm.OwnerUUID),
		"platform_buildstamp": nil,
		"quota":               nil,
		"ram":                 nil,
		"resolvers":           nil,
		"server_uuid":         orNull(vm.ServerUUID),
		"snapshots":           []any{},
		"state":               orNull(vm.State),
		"tags":                orEmpty(vm.Tags),
		"zfs_filesystem":      nil,
		"zfs_io_priority":     nil,
		"zone_state":          orNull(vm.ZoneState),
		"zonepath":            nil,
		"zpool":               nil,
	}
	if vm.Docker {
		wire["docker"] = true
	}
	b, err := json.Marshal(wire)
	if err != nil {
		// The world only holds VMs checkVM passed; a failure is a bug.
		panic("sdcsim: marshal VM: " + err.Error())
	}
	return decodeDoc(b), b
}

// renderVMNIC is one entry of a VM's "nics" as vmadm reports it: the keys
// it has, absent when unset (vlan_id 0 included), primary only when true.
func renderVMNIC(n *dc.NIC) map[string]any {
	out := map[string]any{}
	for k, v := range map[string]string{"interface": n.Interface, "mac": n.MAC, "nic_tag": n.NICTag,
		"ip": n.IP, "netmask": n.Netmask, "gateway": n.Gateway, "network_uuid": n.NetworkUUID} {
		if v != "" {
			out[k] = v
		}
	}
	if n.VLANID != nil {
		out["vlan_id"] = *n.VLANID
	}
	if len(n.IPs) > 0 {
		out["ips"] = n.IPs
	}
	if n.Primary {
		out["primary"] = true
	}
	return out
}

// renderDestroyed is VMAPI's destroyed: null, or the ISO time (true for an
// inventory that only says it was).
func renderDestroyed(d dc.Destroyed) any {
	switch {
	case !d.Set:
		return nil
	case d.Time != "":
		return d.Time
	}
	return true
}

func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// decodeDoc decodes JSON into generic values, keeping numbers as json.Number
// so that a render/decode round trip never changes a value.
func decodeDoc(b []byte) map[string]any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var doc map[string]any
	if err := d.Decode(&doc); err != nil {
		panic("sdcsim: decode rendered JSON: " + err.Error())
	}
	return doc
}

// zoneStateFor is the zone_state vmadm reports for a VMAPI state, used when
// an inventory leaves zone_state out.
func zoneStateFor(state string) string {
	switch state {
	case "running":
		return "running"
	case "provisioning":
		return "installed"
	case "stopped", "destroyed", "failed":
		return "installed"
	default:
		return ""
	}
}

// normalizeVM fills in what VMAPI always has and an inventory may omit.
func normalizeVM(vm *dc.VM, now string) {
	if vm.ZoneState == "" {
		vm.ZoneState = zoneStateFor(vm.State)
	}
	if vm.CreateTimestamp == "" {
		vm.CreateTimestamp = now
	}
	if vm.LastModified == "" {
		vm.LastModified = vm.CreateTimestamp
	}
	if vm.Tags == nil {
		vm.Tags = map[string]any{}
	}
	if vm.CustomerMetadata == nil {
		vm.CustomerMetadata = map[string]any{}
	}
	if vm.InternalMetadata == nil {
		vm.InternalMetadata = map[string]any{}
	}
	if vm.NICs == nil {
		vm.NICs = []dc.NIC{}
	}
	if vm.State == "destroyed" && !vm.Destroyed.Set {
		vm.Destroyed = dc.Destroyed{Set: true, Time: vm.LastModified}
	}
}

// copyVM returns a deep copy, so that a mutation function never aliases the
// world's maps and slices.
func copyVM(vm dc.VM) dc.VM {
	b, err := json.Marshal(vm)
	if err != nil {
		panic("sdcsim: marshal VM: " + err.Error())
	}
	var c dc.VM
	if err := json.Unmarshal(b, &c); err != nil {
		panic("sdcsim: unmarshal VM: " + err.Error())
	}
	// omitempty drops an empty internal_metadata; keep the copy's shape.
	if c.InternalMetadata == nil && vm.InternalMetadata != nil {
		c.InternalMetadata = map[string]any{}
	}
	return c
}

// changedKeys lists the top-level keys that differ between two renderings,
// once per difference deep-diff would report (sdc-apis §2.3): a changed NIC
// field gives one "nics", two give two. A nil old document stands for VM
// creation, where VMAPI diffs against {} and every key appears once.
func changedKeys(old, cur map[string]any) []string {
	keys := make(map[string]bool)
	for k := range old {
		keys[k] = true
	}
	for k := range cur {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []string
	for _, k := range sorted {
		ov, inOld := old[k]
		nv, inNew := cur[k]
		n := 1
		if inOld && inNew {
			n = diffCount(ov, nv)
		}
		for range n {
			out = append(out, k)
		}
	}
	return out
}

// diffCount counts the differences deep-diff reports between two JSON
// values: one per changed leaf, per key added or removed, per array element
// added or removed, and one for a change of type.
func diffCount(a, b any) int {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return 1
		}
		n := 0
		for k, x := range av {
			if y, ok := bv[k]; ok {
				n += diffCount(x, y)
			} else {
				n++
			}
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				n++
			}
		}
		return n
	case []any:
		bv, ok := b.([]any)
		if !ok {
			return 1
		}
		n := 0
		for i := 0; i < len(av) || i < len(bv); i++ {
			switch {
			case i >= len(av) || i >= len(bv):
				n++
			default:
				n += diffCount(av[i], bv[i])
			}
		}
		return n
	default:
		if a == nil || b == nil {
			if a == nil && b == nil {
				return 0
			}
			return 1
		}
		if _, isMap := b.(map[string]any); isMap {
			return 1
		}
		if _, isSlice := b.([]any); isSlice {
			return 1
		}
		if a != b {
			return 1
		}
		return 0
	}
}
