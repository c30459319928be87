package feeds

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
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
	b = appendString(b, m.Alias)
	b = appendString(b, m.Login)
	b = appendString(b, m.State)
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
	d := fieldDecoder{b: b}
	if v := d.byte(); d.err == nil && v != metaVersion {
		return nil, fmt.Errorf("vm meta: unknown encoding version %d", v)
	}
	m := &VMMeta{UUID: d.uuidField(), Owner: d.uuidField(), Server: d.uuidField(),
		Alias: d.string(), Login: d.string(), State: d.string()}
	flags := d.byte()
	m.CNDown, m.ComputeNode = flags&metaCNDown != 0, flags&metaComputeNode != 0
	m.ListInstance, m.ListServices = flags&metaListInstance != 0, flags&metaListServices != 0
	if n, ok := d.count(); ok {
		m.Reasons = append([]string{}, d.strings(n)...)
	}
	m.Services = d.strings(d.uvarint())
	m.Problems = d.strings(d.uvarint())
	if t := d.varint(); t != 0 {
		m.Updated = time.Unix(0, t).UTC()
	}
	if err := d.end("vm meta"); err != nil {
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
	d := fieldDecoder{b: b}
	if v := d.byte(); d.err == nil && v != metaVersion {
		return "", "", "", fmt.Errorf("vm meta: unknown encoding version %d", v)
	}
	d.skipUUIDField() // the VM's own
	owner = d.uuidField()
	d.skipUUIDField() // its server
	alias, login = d.string(), d.string()
	if d.err != nil {
		return "", "", "", fmt.Errorf("vm meta: %w", d.err)
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

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
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
		b = appendString(b, s)
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
	return appendString(append(b, 0), s)
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

// fieldDecoder reads the field encodings (VMMeta's, the VM facts'); the
// first short read sets err and every later read returns zero.
type fieldDecoder struct {
	b   []byte
	err error
}

var errFieldShort = errors.New("value truncated")

// end returns the first error, or one when bytes are left over, naming
// what was read.
func (d *fieldDecoder) end(what string) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("%s: %w", what, d.err)
	}
	return nil
}

func (d *fieldDecoder) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errFieldShort
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *fieldDecoder) byte() byte {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *fieldDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errFieldShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *fieldDecoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errFieldShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *fieldDecoder) string() string { return string(d.take(d.uvarint())) }

func (d *fieldDecoder) strings(n uint64) []string {
	if n > uint64(len(d.b)) { // each string takes at least its length octet
		d.err = errFieldShort
		return nil
	}
	var out []string
	for i := uint64(0); i < n && d.err == nil; i++ {
		out = append(out, d.string())
	}
	return out
}

// count reads what appendCount wrote; ok is false for nil. A count
// larger than the bytes left (each element takes at least one) is an
// error, so a damaged count never allocates much.
func (d *fieldDecoder) count() (n uint64, ok bool) {
	c := d.uvarint()
	if c == 0 || d.err != nil {
		return 0, false
	}
	if c-1 > uint64(len(d.b)) {
		d.err = errFieldShort
		return 0, false
	}
	return c - 1, true
}

// skipUUIDField passes over what uuidField would read.
func (d *fieldDecoder) skipUUIDField() {
	switch d.byte() {
	case 0:
		d.take(d.uvarint())
	case 1:
		d.take(16)
	default:
		if d.err == nil {
			d.err = errors.New("bad uuid field tag")
		}
	}
}

func (d *fieldDecoder) uuidField() string {
	switch d.byte() {
	case 0:
		return d.string()
	case 1:
		if v := d.take(16); v != nil {
			return unpackUUID(v)
		}
	default:
		if d.err == nil {
			d.err = errors.New("bad uuid field tag")
		}
	}
	return ""
}
