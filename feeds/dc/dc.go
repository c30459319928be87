// Package dc is what a Triton data center holds, as cns sees it: VMs and
// their NICs, users, compute nodes, networks and network pools, exactly as
// the SDC APIs (VMAPI, CNAPI, NAPI, UFDS) put them on the wire, and a whole
// data center's Inventory. It is pure: no clients, no I/O but reading an
// inventory file.
//
// The SDC clients (feeds/sdc), the inventory file feed (feeds/file), the
// simulator (feeds/sdc/sdcsim) and the record builder (feeds/records) share
// these types, so a file written for one is read by the others unchanged.
package dc

import (
	"encoding/json"
	"fmt"
	"time"
)

// VM is a VMAPI VM object (GET /vms, GET /vms/:uuid). Only the fields cns
// reads are typed; everything else a real VMAPI returns is accepted and
// ignored. Nullable fields are pointers or the zero value.
type VM struct {
	UUID             string         `json:"uuid"`
	Alias            *string        `json:"alias"`
	OwnerUUID        string         `json:"owner_uuid"`
	ServerUUID       string         `json:"server_uuid"`
	State            string         `json:"state"`
	ZoneState        string         `json:"zone_state,omitempty"`
	Brand            string         `json:"brand,omitempty"`
	Docker           bool           `json:"docker,omitempty"`
	Destroyed        Destroyed      `json:"destroyed"`
	CreateTimestamp  string         `json:"create_timestamp,omitempty"`
	LastModified     string         `json:"last_modified,omitempty"`
	NICs             []NIC          `json:"nics"`
	Tags             map[string]any `json:"tags"`
	CustomerMetadata map[string]any `json:"customer_metadata"`
	InternalMetadata map[string]any `json:"internal_metadata,omitempty"`
}

// AliasString returns the alias, or "" when VMAPI sent null.
func (vm *VM) AliasString() string {
	if vm.Alias == nil {
		return ""
	}
	return *vm.Alias
}

// Destroyed is VMAPI's "destroyed" field: null for a live VM, an ISO-8601
// timestamp once destroyed. Older VMAPIs and hand-written inventories also
// use a boolean, which the reference implementation accepted too.
type Destroyed struct {
	Set  bool
	Time string
}

// UnmarshalJSON is given one valid JSON value (encoding/json checked it):
// its first byte says what it is, without decoding it into an interface
// (a load decodes a million of them).
func (d *Destroyed) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		*d = Destroyed{}
	case string(b) == "true" || string(b) == "false":
		*d = Destroyed{Set: b[0] == 't'}
	case len(b) > 0 && b[0] == '"':
		var t string
		if err := json.Unmarshal(b, &t); err != nil {
			return err
		}
		*d = Destroyed{Set: t != "", Time: t}
	default:
		return fmt.Errorf("destroyed: want null, boolean or timestamp string, got %s", b)
	}
	return nil
}

func (d Destroyed) MarshalJSON() ([]byte, error) {
	switch {
	case !d.Set:
		return []byte("null"), nil
	case d.Time != "":
		return json.Marshal(d.Time)
	default:
		return []byte("true"), nil
	}
}

// NIC is one entry of a VM's "nics" array, as vmadm reports it through VMAPI.
type NIC struct {
	Interface   string   `json:"interface,omitempty"`
	MAC         string   `json:"mac,omitempty"`
	VLANID      *int     `json:"vlan_id,omitempty"`
	NICTag      string   `json:"nic_tag,omitempty"`
	IP          string   `json:"ip,omitempty"`
	IPs         []string `json:"ips,omitempty"`
	Netmask     string   `json:"netmask,omitempty"`
	Gateway     string   `json:"gateway,omitempty"`
	NetworkUUID string   `json:"network_uuid,omitempty"`
	Primary     bool     `json:"primary,omitempty"`
}

// Addresses returns the NIC's addresses as VMAPI lists them: "ips" when
// present, else "ip". Entries may carry a "/prefix" and may be the
// placeholders "dhcp" or "addrconf"; callers decide what to do with those.
func (n *NIC) Addresses() []string {
	if len(n.IPs) > 0 {
		return n.IPs
	}
	if n.IP != "" {
		return []string{n.IP}
	}
	return nil
}

// Server is a CNAPI server object (GET /servers?extras=status,sysinfo).
type Server struct {
	UUID               string         `json:"uuid"`
	Hostname           string         `json:"hostname,omitempty"`
	Setup              bool           `json:"setup"`
	Status             string         `json:"status"`
	TransitionalStatus string         `json:"transitional_status,omitempty"`
	LastHeartbeat      *string        `json:"last_heartbeat"`
	LastBoot           string         `json:"last_boot,omitempty"`
	Headnode           bool           `json:"headnode,omitempty"`
	Datacenter         string         `json:"datacenter,omitempty"`
	Sysinfo            map[string]any `json:"sysinfo,omitempty"`
	// NotRunningSince is not on the wire: when the feed first saw the CN
	// with a status other than running (zero while running, or unknown),
	// the clock of the CN-down rule when last_heartbeat is null.
	NotRunningSince time.Time `json:"-"`
}

// AdminNICTag is the CN's "Admin NIC Tag" from sysinfo, "admin" by default.
func (s *Server) AdminNICTag() string {
	if v, ok := s.Sysinfo["Admin NIC Tag"].(string); ok && v != "" {
		return v
	}
	return "admin"
}

// User is a UFDS sdcperson entry, reduced to the attributes cns reads. UFDS
// values are strings: the flags are "true" or "false", possibly absent.
type User struct {
	UUID                    string `json:"uuid"`
	Login                   string `json:"login"`
	TritonCNSEnabled        string `json:"triton_cns_enabled,omitempty"`
	ApprovedForProvisioning string `json:"approved_for_provisioning,omitempty"`
}

// Flag reports a UFDS boolean attribute the way CNS always has: absent or
// "false" is off, any other string is on.
func Flag(v string) bool {
	return v != "" && v != "false"
}

// Network is a NAPI network object (GET /networks/:uuid).
type Network struct {
	UUID       string   `json:"uuid"`
	Name       string   `json:"name"`
	Family     string   `json:"family,omitempty"`
	Subnet     string   `json:"subnet,omitempty"`
	VLANID     *int     `json:"vlan_id,omitempty"`
	NICTag     string   `json:"nic_tag,omitempty"`
	OwnerUUIDs []string `json:"owner_uuids,omitempty"`
	Fabric     bool     `json:"fabric,omitempty"`
}

// NetworkPool is a NAPI network pool object (GET /network_pools).
type NetworkPool struct {
	UUID       string   `json:"uuid"`
	Name       string   `json:"name"`
	Family     string   `json:"family,omitempty"`
	Networks   []string `json:"networks"`
	NICTag     string   `json:"nic_tag,omitempty"`
	OwnerUUIDs []string `json:"owner_uuids,omitempty"`
}

// DecodeVM decodes a VM object (a changefeed resourceObject, say) the way
// the listing does.
func DecodeVM(b []byte) (VM, error) {
	var w WireVM
	if err := json.Unmarshal(b, &w); err != nil {
		return VM{}, err
	}
	return w.Checked()
}

// WireVM decodes a VMAPI VM without internal_metadata, which cns does not
// read and which holds the bulk of a docker VM (its shadowing field wins
// over the embedded one).
type WireVM struct {
	VM
	InternalMetadata skipJSON `json:"internal_metadata"`
}

// Checked checks what every consumer relies on and drops what the reference's
// cleanVM drops from customer_metadata.
func (w *WireVM) Checked() (VM, error) {
	vm := w.VM
	if !IsUUID(vm.UUID) {
		return VM{}, fmt.Errorf("VM uuid %q is not a UUID", vm.UUID)
	}
	delete(vm.CustomerMetadata, "user-script")
	delete(vm.CustomerMetadata, "root_authorized_keys")
	return vm, nil
}

type skipJSON struct{}

func (*skipJSON) UnmarshalJSON([]byte) error { return nil }
