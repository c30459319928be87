package db

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// vmEntry is what the store keeps per VM.
type vmEntry struct {
	meta  []byte
	names []vmName
}

// vmName is one name a VM contributes to.
type vmName struct {
	zone string
	key  []byte
}

// encode writes the names grouped by zone, so a zone's name is stored once
// per VM rather than once per name.
func (v *vmEntry) encode() []byte {
	e := &enc{}
	e.u8(2)
	e.bytes32(v.meta)
	names := slices.Clone(v.names)
	slices.SortStableFunc(names, func(a, b vmName) int { return strings.Compare(a.zone, b.zone) })
	var groups int
	for i := range names {
		if i == 0 || names[i].zone != names[i-1].zone {
			groups++
		}
	}
	e.u16(uint16(groups))
	for i := 0; i < len(names); {
		j := i
		for j < len(names) && names[j].zone == names[i].zone {
			j++
		}
		e.str(names[i].zone)
		e.u32(uint32(j - i))
		for _, n := range names[i:j] {
			e.bytes16(n.key)
		}
		i = j
	}
	return e.b
}

func decodeVMEntry(b []byte) (vmEntry, error) {
	d := &dec{b: b}
	d.version(2, "vm entry")
	v := vmEntry{meta: d.bytes32()}
	groups := int(d.u16())
	for g := 0; g < groups && d.err == nil; g++ {
		zone := d.str()
		n := int(d.u32())
		for i := 0; i < n && d.err == nil; i++ {
			v.names = append(v.names, vmName{zone: zone, key: d.bytes16()})
		}
	}
	return v, d.done("vm entry")
}

// parseUUID turns a textual UUID into its 16 bytes.
func parseUUID(s string) ([16]byte, error) {
	var id [16]byte
	h := strings.ReplaceAll(s, "-", "")
	if len(s) != 36 || len(h) != 32 {
		return id, fmt.Errorf("vm uuid %q is not a UUID", s)
	}
	if _, err := hex.Decode(id[:], []byte(h)); err != nil {
		return id, fmt.Errorf("vm uuid %q is not a UUID", s)
	}
	return id, nil
}

// formatUUID is the inverse of parseUUID, in lower case.
func formatUUID(id [16]byte) string {
	h := hex.EncodeToString(id[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
