// Package field is the binary field encoding of what cns stores and keeps
// in memory (the store's entries and journal, a VM's meta, the updater's
// VM facts): fixed-width big-endian integers, varints, and strings and
// byte strings prefixed with their length. One Encoder writes them and
// one Decoder reads them back; the Decoder's first short read sets its
// error and every later read returns zero, so a decoder checks Err once,
// at the end (Done).
package field

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Encoder appends fields to B.
type Encoder struct{ B []byte }

func (e *Encoder) U8(v uint8)       { e.B = append(e.B, v) }
func (e *Encoder) U16(v uint16)     { e.B = binary.BigEndian.AppendUint16(e.B, v) }
func (e *Encoder) U32(v uint32)     { e.B = binary.BigEndian.AppendUint32(e.B, v) }
func (e *Encoder) U64(v uint64)     { e.B = binary.BigEndian.AppendUint64(e.B, v) }
func (e *Encoder) I64(v int64)      { e.U64(uint64(v)) }
func (e *Encoder) Uvarint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }

// Bytes16 and Bytes32 write a byte string after its length (16 and 32
// bits), Str16 a string so.
func (e *Encoder) Bytes16(v []byte) { e.U16(uint16(len(v))); e.B = append(e.B, v...) }
func (e *Encoder) Bytes32(v []byte) { e.U32(uint32(len(v))); e.B = append(e.B, v...) }
func (e *Encoder) Str16(v string)   { e.U16(uint16(len(v))); e.B = append(e.B, v...) }

// AppendStr appends s after its length as a uvarint (Decoder.Str).
func AppendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// Decoder reads fields from B.
type Decoder struct {
	B   []byte
	Err error
}

// ErrShort is the error of a read past the end.
var ErrShort = errors.New("value truncated")

// Take returns the next n bytes (not copied).
func (d *Decoder) Take(n uint64) []byte {
	if d.Err != nil {
		return nil
	}
	if n > uint64(len(d.B)) {
		d.Err = ErrShort
		return nil
	}
	v := d.B[:n:n]
	d.B = d.B[n:]
	return v
}

func (d *Decoder) U8() uint8 {
	if v := d.Take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *Decoder) U16() uint16 {
	if v := d.Take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (d *Decoder) U32() uint32 {
	if v := d.Take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *Decoder) U64() uint64 {
	if v := d.Take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (d *Decoder) I64() int64 { return int64(d.U64()) }

// Uvarint reads a uvarint in its shortest form, so that a value
// re-encodes to its bytes.
func (d *Decoder) Uvarint() uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Err = ErrShort
		return 0
	}
	if n > 1 && d.B[n-1] == 0 {
		d.Err = errors.New("uvarint not in its shortest form")
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Varint reads a signed varint.
func (d *Decoder) Varint() int64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.Err = ErrShort
		return 0
	}
	d.B = d.B[n:]
	return v
}

func (d *Decoder) Bytes16() []byte { return d.Take(uint64(d.U16())) }
func (d *Decoder) Bytes32() []byte { return d.Take(uint64(d.U32())) }
func (d *Decoder) Str16() string   { return string(d.Bytes16()) }

// Str reads what AppendStr wrote.
func (d *Decoder) Str() string { return string(d.Take(d.Uvarint())) }

// Version reads a version octet, an error unless it is want.
func (d *Decoder) Version(want uint8, what string) {
	if v := d.U8(); d.Err == nil && v != want {
		d.Err = fmt.Errorf("%s: unknown encoding version %d", what, v)
	}
}

// Done returns the first error, or one when bytes are left over, naming
// what was read.
func (d *Decoder) Done(what string) error {
	if d.Err == nil && len(d.B) != 0 {
		d.Err = fmt.Errorf("%d trailing bytes", len(d.B))
	}
	if d.Err != nil {
		return fmt.Errorf("%s: %w", what, d.Err)
	}
	return nil
}
