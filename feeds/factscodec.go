package feeds

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/tritondatacenter/cns/db/field"
	"github.com/tritondatacenter/cns/feeds/dc"
)

// The in-memory encoding of a VM's facts (storedVM.facts): the trimmed VM
// (trimVM) in the field encoding VMMeta's uses. The updater holds one per
// VM and decodes it whenever the VM is recomputed, which a first load does
// for every VM once: JSON both ways cost a quarter of a 1M-VM load's feed
// stage (encode 3.3 s, decode 7.5 s of CPU under the profiler). It is
// never stored, so it has no version: it only has to read back what this
// build wrote, and compare equal exactly when the facts are equal
// (putVM's "unchanged"), so maps are written in key order.
//
// Values read back as a JSON round trip would give them: a tag or
// metadata value that is not a string or a boolean is kept as its JSON.

// tags of a map value
const (
	factString = 's'
	factTrue   = 't'
	factFalse  = 'f'
	factJSON   = 'j'
)

// flags
const (
	factDocker = 1 << iota
	factDestroyed
	factAlias    // Alias is not nil
	factModified // LastModified follows
)

// encodeFacts appends t, a trimmed VM, in the facts encoding to b.
func encodeFacts(b []byte, t *dc.VM) ([]byte, error) {
	b = appendUUIDField(b, t.UUID)
	b = appendUUIDField(b, t.OwnerUUID)
	b = appendUUIDField(b, t.ServerUUID)
	b = append(b, flagOctet(flag{t.Docker, factDocker}, flag{t.Destroyed.Set, factDestroyed},
		flag{t.Alias != nil, factAlias}, flag{t.LastModified != "", factModified}))
	b = field.AppendStr(b, t.State)
	if t.Alias != nil {
		b = field.AppendStr(b, *t.Alias)
	}
	if t.Destroyed.Set {
		b = field.AppendStr(b, t.Destroyed.Time)
	}
	if t.LastModified != "" {
		b = field.AppendStr(b, t.LastModified)
	}
	b = appendCount(b, t.NICs == nil, len(t.NICs))
	for i := range t.NICs {
		n := &t.NICs[i]
		b = field.AppendStr(b, n.IP)
		b = binary.AppendUvarint(b, uint64(len(n.IPs))) // omitempty: [] reads back as nil
		b = appendStrings(b, n.IPs)
		b = appendUUIDField(b, n.NetworkUUID)
		b = field.AppendStr(b, n.NICTag)
		if n.VLANID == nil {
			b = append(b, 0)
		} else {
			b = binary.AppendVarint(append(b, 1), int64(*n.VLANID))
		}
	}
	var err error
	if b, err = appendFactMap(b, t.Tags); err != nil {
		return nil, fmt.Errorf("tags: %w", err)
	}
	if b, err = appendFactMap(b, t.CustomerMetadata); err != nil {
		return nil, fmt.Errorf("customer_metadata: %w", err)
	}
	return b, nil
}

// appendFactMap writes m's entries in key order.
func appendFactMap(b []byte, m map[string]any) ([]byte, error) {
	b = appendCount(b, m == nil, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b = field.AppendStr(b, k)
		switch v := m[k].(type) {
		case string:
			b = field.AppendStr(append(b, factString), v)
		case bool:
			if v {
				b = append(b, factTrue)
			} else {
				b = append(b, factFalse)
			}
		default:
			j, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			b = field.AppendStr(append(b, factJSON), string(j))
		}
	}
	return b, nil
}

// decodeFacts reads what encodeFacts wrote.
func decodeFacts(b []byte) (*dc.VM, error) {
	d := fieldDecoder{field.Decoder{B: b}}
	vm := &dc.VM{UUID: d.uuidField(), OwnerUUID: d.uuidField(), ServerUUID: d.uuidField()}
	flags := d.U8()
	vm.State = d.Str()
	vm.Docker = flags&factDocker != 0
	if flags&factAlias != 0 {
		alias := d.Str()
		vm.Alias = &alias
	}
	if flags&factDestroyed != 0 {
		vm.Destroyed = dc.Destroyed{Set: true, Time: d.Str()}
	}
	if flags&factModified != 0 {
		vm.LastModified = d.Str()
	}
	if n, ok := d.count(); ok {
		vm.NICs = make([]dc.NIC, 0, n)
		for i := uint64(0); i < n && d.Err == nil; i++ {
			nic := dc.NIC{IP: d.Str()}
			nic.IPs = d.strings(d.Uvarint())
			nic.NetworkUUID, nic.NICTag = d.uuidField(), d.Str()
			if d.U8() == 1 {
				v := int(d.Varint())
				nic.VLANID = &v
			}
			vm.NICs = append(vm.NICs, nic)
		}
	}
	vm.Tags = d.factMap()
	vm.CustomerMetadata = d.factMap()
	if err := d.Done("vm facts"); err != nil {
		return nil, err
	}
	return vm, nil
}

func (d *fieldDecoder) factMap() map[string]any {
	n, ok := d.count()
	if !ok {
		return nil
	}
	m := make(map[string]any, n)
	for i := uint64(0); i < n && d.Err == nil; i++ {
		k := d.Str()
		switch tag := d.U8(); tag {
		case factString:
			m[k] = d.Str()
		case factTrue, factFalse:
			m[k] = tag == factTrue
		case factJSON:
			var v any
			if err := json.Unmarshal(d.Take(d.Uvarint()), &v); err != nil && d.Err == nil {
				d.Err = fmt.Errorf("%s: %w", k, err)
			}
			m[k] = v
		default:
			if d.Err == nil {
				d.Err = errors.New("bad value tag")
			}
		}
	}
	return m
}
