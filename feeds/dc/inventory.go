package dc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
)

// Inventory is a whole data center as the SDC APIs describe it: the format
// of the inventory file feed and the seed of the SDC simulator.
type Inventory struct {
	VMs          []VM          `json:"vms"`
	Servers      []Server      `json:"servers"`
	Users        []User        `json:"users"`
	Networks     []Network     `json:"networks"`
	NetworkPools []NetworkPool `json:"network_pools"`
	// Since is what the sink's BeginListing returned when the listing
	// began: a change the sink got after it overtakes the listing's copy
	// of its VM. Zero: nothing overtakes the listing (a file).
	Since uint64 `json:"-"`
}

// LoadInventory reads and validates an inventory file: the format of the
// file feed and of the simulator (`cns sim`).
func LoadInventory(path string) (*Inventory, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	inv, err := ParseInventory(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return inv, nil
}

// ParseInventory decodes and validates an inventory. Errors name the object and
// field at fault ("vms[3] (uuid): nics: ...") or the line and column of a
// syntax error.
func ParseInventory(data []byte) (*Inventory, error) {
	inv, err := parseInventory(data)
	if err != nil && !json.Valid(data) {
		// The split checks no values: a broken document is reported
		// where it breaks, whatever part failed first.
		var top map[string]json.RawMessage
		return nil, describeJSONError(data, json.Unmarshal(data, &top))
	}
	return inv, err
}

func parseInventory(data []byte) (*Inventory, error) {
	top, ok := splitObject(data)
	if !ok { // not a valid JSON object: the decoder says why (or null: empty)
		if err := json.Unmarshal(data, &top); err != nil {
			return nil, describeJSONError(data, err)
		}
	}
	inv := &Inventory{}
	sections := []struct {
		key  string
		into func(json.RawMessage) error
	}{
		{"vms", func(r json.RawMessage) error { return decodeList(r, "vms", &inv.VMs) }},
		{"servers", func(r json.RawMessage) error { return decodeList(r, "servers", &inv.Servers) }},
		{"users", func(r json.RawMessage) error { return decodeList(r, "users", &inv.Users) }},
		{"networks", func(r json.RawMessage) error { return decodeList(r, "networks", &inv.Networks) }},
		{"network_pools", func(r json.RawMessage) error { return decodeList(r, "network_pools", &inv.NetworkPools) }},
	}
	known := map[string]bool{}
	for _, s := range sections {
		known[s.key] = true
		if raw, ok := top[s.key]; ok {
			if err := s.into(raw); err != nil {
				return nil, err
			}
		}
	}
	for k := range top {
		if !known[k] {
			return nil, fmt.Errorf("unknown top-level key %q (want vms, servers, users, networks, network_pools)", k)
		}
	}
	if err := inv.Validate(); err != nil {
		return nil, err
	}
	return inv, nil
}

// decodeList decodes a JSON array element by element so an error can say
// which element is wrong. The elements are decoded on every core (an
// inventory holds up to a million VMs); the error reported is the first
// element's, as one pass would find it.
func decodeList[T any](raw json.RawMessage, key string, into *[]T) error {
	items, ok := splitArray(raw)
	if !ok {
		if err := json.Unmarshal(raw, &items); err != nil {
			return fmt.Errorf("%s: want an array: %w", key, err)
		}
	}
	out := make([]T, len(items))
	workers := min(runtime.GOMAXPROCS(0), 1+len(items)/256)
	fails := make([]error, workers) // each share's first failure
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { // a contiguous share; its first failure, if any
			for i := w * len(items) / workers; i < (w+1)*len(items)/workers; i++ {
				if err := json.Unmarshal(items[i], &out[i]); err != nil {
					fails[w] = fmt.Errorf("%s[%d]%s: %w", key, i, idOf(items[i]), fieldError(err))
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range fails { // in share order: the first is the lowest element
		if err != nil {
			return err
		}
	}
	*into = out
	return nil
}

// idOf returns " (uuid)" when the item has a readable uuid.
func idOf(item json.RawMessage) string {
	var v struct {
		UUID string `json:"uuid"`
	}
	if json.Unmarshal(item, &v) == nil && v.UUID != "" {
		return " (" + v.UUID + ")"
	}
	return ""
}

// fieldError rewrites encoding/json type errors into "field: want T, got V".
func fieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("%s: want %s, got %s", te.Field, te.Type, te.Value)
	}
	return err
}

// describeJSONError adds the line and column to a syntax error.
func describeJSONError(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + bytes.Count(data[:se.Offset], []byte("\n"))
		col := int(se.Offset) - bytes.LastIndexByte(data[:se.Offset], '\n')
		return fmt.Errorf("line %d, column %d: %v", line, col, err)
	}
	return fieldError(err)
}

// Validate checks what every consumer relies on: identifiers present and
// well-formed, no duplicates, and references that resolve. It names the
// first offending object.
func (inv *Inventory) Validate() error {
	// Each kind's UUIDs, by the index of the first object with it: a
	// million VMs' worth, so no string is built unless one is wrong.
	seen := map[string]map[string]int{}
	check := func(kind, id string, i, n int) error {
		if !IsUUID(id) {
			return fmt.Errorf("%s[%d]: uuid %q is not a UUID", kind, i, id)
		}
		ids := seen[kind]
		if ids == nil {
			ids = make(map[string]int, n)
			seen[kind] = ids
		}
		if prev, dup := ids[id]; dup {
			return fmt.Errorf("%s[%d]: uuid %s already used by %s[%d]", kind, i, id, kind, prev)
		}
		ids[id] = i
		return nil
	}
	for i := range inv.Users {
		u := &inv.Users[i]
		if err := check("users", u.UUID, i, len(inv.Users)); err != nil {
			return err
		}
		if u.Login == "" {
			return fmt.Errorf("users[%d] (%s): login is empty", i, u.UUID)
		}
	}
	for i := range inv.Servers {
		if err := check("servers", inv.Servers[i].UUID, i, len(inv.Servers)); err != nil {
			return err
		}
	}
	for i := range inv.Networks {
		if err := check("networks", inv.Networks[i].UUID, i, len(inv.Networks)); err != nil {
			return err
		}
	}
	networks := seen["networks"]
	for i := range inv.NetworkPools {
		p := &inv.NetworkPools[i]
		if err := check("network_pools", p.UUID, i, len(inv.NetworkPools)); err != nil {
			return err
		}
		for _, n := range p.Networks {
			if _, ok := networks[n]; !ok {
				return fmt.Errorf("network_pools[%d] (%s): network %s is not in networks", i, p.UUID, n)
			}
		}
	}
	for i := range inv.VMs {
		vm := &inv.VMs[i]
		if err := check("vms", vm.UUID, i, len(inv.VMs)); err != nil {
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
				if _, ok := networks[n.NetworkUUID]; !ok {
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
