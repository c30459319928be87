package db

import (
	"bytes"
	"encoding/binary"
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

// The VM entry's encodings. Version 2 (schema 1) held the meta with a
// 32-bit length and every name key in full. Version 3 (schema 2) is what
// encode writes: one entry per VM of the data center, so every byte counts
// 100k or 1M times.
//
//	u8 3
//	uvarint len(meta), meta
//	uvarint zones; per zone: uvarint len(zone), zone,
//	    uvarint names; per name: u8 labels, then each label
//
// A name key is its labels (see relativeKey); a label already seen in
// this entry is written as one octet 0xC0|index, the VM's own UUID being
// label 0, so the UUIDs that recur in a VM's names (its own, its owner's)
// are written once at most. A literal label is its length octet (below
// 64) and its bytes, and takes the next index while indexes remain.
const (
	vmEntryV2    = 2
	vmEntryV3    = 3
	labelRef     = 0xC0
	maxLabelRefs = 64
)

// encode writes the names grouped by zone, so a zone's name is stored once
// per VM rather than once per name. id is the VM's UUID.
func (v *vmEntry) encode(id [16]byte) []byte {
	names := slices.Clone(v.names)
	slices.SortStableFunc(names, func(a, b vmName) int { return strings.Compare(a.zone, b.zone) })
	// Written on the stack, kept at its size: a first load holds a chunk's
	// entries until its commit ends, and grown by appending they kept up to
	// twice their size.
	var stack [512]byte
	b := append(stack[:0], vmEntryV3)
	b = binary.AppendUvarint(b, uint64(len(v.meta)))
	b = append(b, v.meta...)
	var groups int
	for i := range names {
		if i == 0 || names[i].zone != names[i-1].zone {
			groups++
		}
	}
	b = binary.AppendUvarint(b, uint64(groups))
	labels := newLabelTable(id)
	for i := 0; i < len(names); {
		j := i
		for j < len(names) && names[j].zone == names[i].zone {
			j++
		}
		b = binary.AppendUvarint(b, uint64(len(names[i].zone)))
		b = append(b, names[i].zone...)
		b = binary.AppendUvarint(b, uint64(j-i))
		for _, n := range names[i:j] {
			b = labels.appendKey(b, n.key)
		}
		i = j
	}
	return bytes.Clone(b)
}

// labelTable is the labels an entry has written so far.
type labelTable [][]byte

func newLabelTable(id [16]byte) labelTable {
	own := []byte(formatUUID(id))
	return labelTable{append([]byte{byte(len(own))}, own...)}
}

// appendKey writes key's labels, each a reference when t holds it. A key
// that is not a sequence of labels (never stored) is written as one
// literal per its bytes' own framing, as far as it goes.
func (t *labelTable) appendKey(b, key []byte) []byte {
	count := len(b)
	b = append(b, 0)
	n := 0
	for i := 0; i < len(key); n++ {
		end := min(i+1+int(key[i]), len(key))
		label := key[i:end]
		i = end
		if ref := slices.IndexFunc(*t, func(l []byte) bool { return bytes.Equal(l, label) }); ref >= 0 {
			b = append(b, labelRef|byte(ref))
			continue
		}
		b = append(b, label...)
		if len(*t) < maxLabelRefs {
			*t = append(*t, label)
		}
	}
	b[count] = byte(n)
	return b
}

func decodeVMEntry(id [16]byte, b []byte) (vmEntry, error) {
	if len(b) > 0 && b[0] == vmEntryV2 {
		return decodeVMEntryV2(b)
	}
	d := &dec{B: b}
	d.Version(vmEntryV3, "vm entry")
	v := vmEntry{meta: d.Take(d.Uvarint())}
	labels := newLabelTable(id)
	groups := d.Uvarint()
	for g := uint64(0); g < groups && d.Err == nil; g++ {
		zone := string(d.Take(d.Uvarint()))
		n := d.Uvarint()
		for i := uint64(0); i < n && d.Err == nil; i++ {
			v.names = append(v.names, vmName{zone: zone, key: labels.readKey(d)})
		}
	}
	return v, d.Done("vm entry")
}

// vmEntryMeta reads only the meta of an encoded entry, for readers that
// need no names (VMMetas): the names are most of an entry's decoding.
func vmEntryMeta(b []byte) ([]byte, error) {
	d := &dec{B: b}
	var meta []byte
	if len(b) > 0 && b[0] == vmEntryV2 {
		d.Version(vmEntryV2, "vm entry")
		meta = d.Bytes32()
	} else {
		d.Version(vmEntryV3, "vm entry")
		meta = d.Take(d.Uvarint())
	}
	if d.Err != nil {
		return nil, fmt.Errorf("vm entry: %w", d.Err)
	}
	return meta, nil
}

// readKey reads what appendKey wrote.
func (t *labelTable) readKey(d *dec) []byte {
	n := int(d.U8())
	var key []byte
	for i := 0; i < n && d.Err == nil; i++ {
		c := d.U8()
		switch {
		case d.Err != nil:
		case c >= labelRef:
			ref := int(c - labelRef)
			if ref >= len(*t) {
				d.Err = fmt.Errorf("label reference %d of %d", ref, len(*t))
				break
			}
			key = append(key, (*t)[ref]...)
		case c >= 64:
			d.Err = fmt.Errorf("bad label octet %#x", c)
		default:
			label := append([]byte{c}, d.Take(uint64(c))...)
			if d.Err == nil {
				key = append(key, label...)
				if len(*t) < maxLabelRefs {
					*t = append(*t, label)
				}
			}
		}
	}
	return key
}

// decodeVMEntryV2 reads the entries of schema 1 (migrate rewrites them).
func decodeVMEntryV2(b []byte) (vmEntry, error) {
	d := &dec{B: b}
	d.Version(vmEntryV2, "vm entry")
	v := vmEntry{meta: d.Bytes32()}
	groups := int(d.U16())
	for g := 0; g < groups && d.Err == nil; g++ {
		zone := d.Str16()
		n := int(d.U32())
		for i := 0; i < n && d.Err == nil; i++ {
			v.names = append(v.names, vmName{zone: zone, key: d.Bytes16()})
		}
	}
	return v, d.Done("vm entry")
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
