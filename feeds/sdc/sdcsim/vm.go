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

// vmNullKeys are the keys VMAPI's translateVm always emits, null when unset
// (sdc-apis §1.3). Emitting them makes decoders that expect the key see it.
var vmNullKeys = []string{
	"uuid", "alias", "autoboot", "brand", "billing_id", "cpu_cap", "cpu_shares",
	"create_timestamp", "destroyed", "last_modified", "limit_priv",
	"max_locked_memory", "max_lwps", "max_physical_memory", "max_swap",
	"owner_uuid", "platform_buildstamp", "quota", "ram", "resolvers",
	"server_uuid", "state", "zfs_filesystem", "zfs_io_priority", "zone_state",
	"zonepath", "zpool",
}

// renderVM turns a VM into VMAPI's wire form: the typed fields plus every
// always-present key, collections defaulting to {} or [] as translateVm does.
func renderVM(vm *dc.VM) (map[string]any, []byte) {
	b, err := json.Marshal(vm)
	if err != nil {
		// dc.VM holds only JSON-safe values; a failure is a programming error.
		panic("sdcsim: marshal VM: " + err.Error())
	}
	doc := decodeDoc(b)
	for _, k := range vmNullKeys {
		if _, ok := doc[k]; !ok {
			doc[k] = nil
		}
	}
	for k, empty := range map[string]func() any{
		"customer_metadata": func() any { return map[string]any{} },
		"internal_metadata": func() any { return map[string]any{} },
		"tags":              func() any { return map[string]any{} },
		"nics":              func() any { return []any{} },
		"datasets":          func() any { return []any{} },
		"snapshots":         func() any { return []any{} },
	} {
		if doc[k] == nil {
			doc[k] = empty()
		}
	}
	if _, ok := doc["firewall_enabled"]; !ok {
		doc["firewall_enabled"] = false
	}
	wire, err := json.Marshal(doc)
	if err != nil {
		panic("sdcsim: marshal VM document: " + err.Error())
	}
	return doc, wire
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
