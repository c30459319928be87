package feeds

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/tritondatacenter/cns/db/field"
)

// The stored encoding of VMMeta. Every VM of the data center has one, so
// it is a few dozen bytes rather than the JSON's ~300: UUIDs as 16
// bytes, the flags in one octet, strings and counts length-prefixed
// (uvarint), the time as Unix nanoseconds (varint, 0 for none). Its
// first octet is the version, never '{', which tells it from the JSON
// that older stores hold (DecodeVMMeta reads both).
const metaVersion = 1

const (
	metaCNDown = 1 << iota
	metaComputeNode
	metaListInstance
	metaListServices
)

// Encode returns m in the stored encoding.
func (m *VMMeta) Encode() []byte {
	b := make([]byte, 0, 96)
	b = append(b, metaVersion)
	b = appendUUIDField(b, m.UUID)
	b = appendUUIDField(b, m.Owner)
	b = appendUUIDField(b, m.Server)
	b = field.AppendStr(b, m.Alias)
	b = field.AppendStr(b, m.Login)
	b = field.AppendStr(b, m.State)
	b = append(b, flagOctet(flag{m.CNDown, metaCNDown}, flag{m.ComputeNode, metaComputeNode},
		flag{m.ListInstance, metaListInstance}, flag{m.ListServices, metaListServices}))
	// Reasons is written as the JSON has it, null or a list; services and
	// problems are omitted there when empty.
	b = appendCount(b, m.Reasons == nil, len(m.Reasons))
	b = appendStrings(b, m.Reasons)
	b = binary.AppendUvarint(b, uint64(len(m.Services)))
	b = appendStrings(b, m.Services)
	b = binary.AppendUvarint(b, uint64(len(m.Problems)))
	b = appendStrings(b, m.Problems)
	var t int64
	if !m.Updated.IsZero() {
		t = m.Updated.UnixNano()
	}
	return binary.AppendVarint(b, t)
}

func decodeVMMetaBinary(b []byte) (*VMMeta, error) {
	d := fieldDecoder{field.Decoder{B: b}}
	if v := d.U8(); d.Err == nil && v != metaVersion {
		return nil, fmt.Errorf("vm meta: unknown encoding version %d", v)
	}
	m := &VMMeta{UUID: d.uuidField(), Owner: d.uuidField(), Server: d.uuidField(),
		Alias: d.Str(), Login: d.Str(), State: d.Str()}
	flags := d.U8()
	m.CNDown, m.ComputeNode = flags&metaCNDown != 0, flags&metaComputeNode != 0
	m.ListInstance, m.ListServices = flags&metaListInstance != 0, flags&metaListServices != 0
	if n, ok := d.count(); ok {
		m.Reasons = append([]string{}, d.strings(n)...)
	}
	m.Services = d.strings(d.Uvarint())
	m.Problems = d.strings(d.Uvarint())
	if t := d.Varint(); t != 0 {
		m.Updated = time.Unix(0, t).UTC()
	}
	if err := d.Done("vm meta"); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeVMMetaNames reads only the names an operator knows a VM by from
// its stored meta: its alias, its owner's UUID and login. The services
// view names every member of every service this way, at a fraction of
// DecodeVMMeta's cost.
func DecodeVMMetaNames(b []byte) (alias, owner, login string, err error) {
	if len(b) > 0 && b[0] == '{' {
		m, err := DecodeVMMeta(b)
		if err != nil {
			return "", "", "", err
		}
		return m.Alias, m.Owner, m.Login, nil
	}
	d := fieldDecoder{field.Decoder{B: b}}
	if v := d.U8(); d.Err == nil && v != metaVersion {
		return "", "", "", fmt.Errorf("vm meta: unknown encoding version %d", v)
	}
	d.skipUUIDField() // the VM's own
	owner = d.uuidField()
	d.skipUUIDField() // its server
	alias, login = d.Str(), d.Str()
	if d.Err != nil {
		return "", "", "", fmt.Errorf("vm meta: %w", d.Err)
	}
	return alias, owner, login, nil
}

// flag is one bit of a field encoding's flags octet.
type flag struct {
	on  bool
	bit byte
}

// flagOctet packs the bits of the flags that are on.
func flagOctet(flags ...flag) byte {
	var o byte
	for _, f := range flags {
		if f.on {
			o |= f.bit
		}
	}
	return o
}

// appendCount writes a list's length, +1 so that 0 can mean nil (JSON's
// null and [] decode apart).
func appendCount(b []byte, isNil bool, n int) []byte {
	if isNil {
		return append(b, 0)
	}
	return binary.AppendUvarint(b, uint64(n)+1)
}

func appendStrings(b []byte, list []string) []byte {
	for _, s := range list {
		b = field.AppendStr(b, s)
	}
	return b
}

// appendUUIDField writes a UUID in lower-case canonical form as 16 bytes
// (tag 1) and anything else (empty, upper case, not a UUID) as a string
// (tag 0), so every value reads back exactly.
func appendUUIDField(b []byte, s string) []byte {
	if id, ok := packUUID(s); ok {
		return append(append(b, 1), id[:]...)
	}
	return field.AppendStr(append(b, 0), s)
}

func packUUID(s string) (id [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, false
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(id[:], []byte(h)); err != nil || hex.EncodeToString(id[:]) != h {
		return id, false // not hex, or not lower case
	}
	return id, true
}

func unpackUUID(id []byte) string {
	h := hex.EncodeToString(id)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// fieldDecoder reads the field encodings (VMMeta's, the VM facts'): the
// store's field primitives (field.Decoder), and the UUID fields, counts
// and string lists these encodings add.
type fieldDecoder struct{ field.Decoder }

func (d *fieldDecoder) strings(n uint64) []string {
	if n > uint64(len(d.B)) { // each string takes at least its length octet
		d.Err = field.ErrShort
		return nil
	}
	var out []string
	for i := uint64(0); i < n && d.Err == nil; i++ {
		out = append(out, d.Str())
	}
	return out
}

// count reads what appendCount wrote; ok is false for nil. A count
// larger than the bytes left (each element takes at least one) is an
// error, so a damaged count never allocates much.
func (d *fieldDecoder) count() (n uint64, ok bool) {
	c := d.Uvarint()
	if c == 0 || d.Err != nil {
		return 0, false
	}
	if c-1 > uint64(len(d.B)) {
		d.Err = field.ErrShort
		return 0, false
	}
	return c - 1, true
}

// skipUUIDField passes over what uuidField would read.
func (d *fieldDecoder) skipUUIDField() {
	switch d.U8() {
	case 0:
		d.Take(d.Uvarint())
	case 1:
		d.Take(16)
	default:
		if d.Err == nil {
			d.Err = errors.New("bad uuid field tag")
		}
	}
}

func (d *fieldDecoder) uuidField() string {
	switch d.U8() {
	case 0:
		return d.Str()
	case 1:
		if v := d.Take(16); v != nil {
			return unpackUUID(v)
		}
	default:
		if d.Err == nil {
			d.Err = errors.New("bad uuid field tag")
		}
	}
	return ""
}
