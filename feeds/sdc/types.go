// Package sdc holds the objects of the Triton (SDC) APIs that cns consumes,
// exactly as those APIs put them on the wire, and the clients that fetch
// them: VMAPI (list, get, changefeed), CNAPI, NAPI and UFDS.
//
// The inventory file feed and the SDC simulator share these types, so a file
// written for one is read by the other unchanged.
package sdc

import (
	"encoding/json"
	"fmt"
	"strings"
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

func (d *Destroyed) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch t := v.(type) {
	case nil:
		*d = Destroyed{}
	case bool:
		*d = Destroyed{Set: t}
	case string:
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

// Inventory is a whole data center as the SDC APIs describe it: the format
// of the inventory file feed and the seed of the SDC simulator.
type Inventory struct {
	VMs          []VM          `json:"vms"`
	Servers      []Server      `json:"servers"`
	Users        []User        `json:"users"`
	Networks     []Network     `json:"networks"`
	NetworkPools []NetworkPool `json:"network_pools"`
}

// Validate checks what every consumer relies on: identifiers present and
// well-formed, no duplicates, and references that resolve. It names the
// first offending object.
func (inv *Inventory) Validate() error {
	seen := make(map[string]string)
	check := func(kind, id string, i int) error {
		if !IsUUID(id) {
			return fmt.Errorf("%s[%d]: uuid %q is not a UUID", kind, i, id)
		}
		if prev, dup := seen[kind+id]; dup {
			return fmt.Errorf("%s[%d]: uuid %s already used by %s", kind, i, id, prev)
		}
		seen[kind+id] = fmt.Sprintf("%s[%d]", kind, i)
		return nil
	}
	for i := range inv.Users {
		u := &inv.Users[i]
		if err := check("users", u.UUID, i); err != nil {
			return err
		}
		if u.Login == "" {
			return fmt.Errorf("users[%d] (%s): login is empty", i, u.UUID)
		}
	}
	for i := range inv.Servers {
		if err := check("servers", inv.Servers[i].UUID, i); err != nil {
			return err
		}
	}
	for i := range inv.Networks {
		if err := check("networks", inv.Networks[i].UUID, i); err != nil {
			return err
		}
	}
	for i := range inv.NetworkPools {
		p := &inv.NetworkPools[i]
		if err := check("network_pools", p.UUID, i); err != nil {
			return err
		}
		for _, n := range p.Networks {
			if _, ok := seen["networks"+n]; !ok {
				return fmt.Errorf("network_pools[%d] (%s): network %s is not in networks", i, p.UUID, n)
			}
		}
	}
	for i := range inv.VMs {
		vm := &inv.VMs[i]
		if err := check("vms", vm.UUID, i); err != nil {
			return err
		}
		if vm.OwnerUUID == "" {
			return fmt.Errorf("vms[%d] (%s): owner_uuid is missing", i, vm.UUID)
		}
		if vm.State == "" {
			return fmt.Errorf("vms[%d] (%s): state is missing", i, vm.UUID)
		}
		for j := range vm.NICs {
			n := &vm.NICs[j]
			if n.NetworkUUID != "" {
				if _, ok := seen["networks"+n.NetworkUUID]; !ok {
					return fmt.Errorf("vms[%d] (%s): nics[%d]: network %s is not in networks", i, vm.UUID, j, n.NetworkUUID)
				}
			}
		}
	}
	return nil
}

// IsUUID reports whether s is a UUID in the canonical 8-4-4-4-12 hex form
// SDC uses everywhere (any case).
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", rune(c)) {
				return false
			}
		}
	}
	return true
}
