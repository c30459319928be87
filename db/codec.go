package db

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// enc appends big-endian fields to a byte slice.
type enc struct{ b []byte }

func (e *enc) u8(v uint8)       { e.b = append(e.b, v) }
func (e *enc) u16(v uint16)     { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *enc) u32(v uint32)     { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64)     { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *enc) i64(v int64)      { e.u64(uint64(v)) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }

// bytes16 and bytes32 write a length-prefixed byte string.
func (e *enc) bytes16(v []byte) { e.u16(uint16(len(v))); e.b = append(e.b, v...) }
func (e *enc) bytes32(v []byte) { e.u32(uint32(len(v))); e.b = append(e.b, v...) }
func (e *enc) str(v string)     { e.bytes16([]byte(v)) }

// dec reads what enc wrote. The first short read sets err and every later
// read returns zero, so a decoder checks err once at the end.
type dec struct {
	b   []byte
	err error
}

var errShort = errors.New("value truncated")

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = errShort
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) u8() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *dec) u16() uint16 {
	if v := d.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (d *dec) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *dec) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (d *dec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	if n > 1 && d.b[n-1] == 0 {
		d.err = errors.New("uvarint not in its shortest form") // so a value re-encodes to its bytes
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) i64() int64      { return int64(d.u64()) }
func (d *dec) bytes16() []byte { return d.take(int(d.u16())) }
func (d *dec) bytes32() []byte { return d.take(int(d.u32())) }
func (d *dec) str() string     { return string(d.bytes16()) }
func (d *dec) version(want uint8, what string) {
	if v := d.u8(); d.err == nil && v != want {
		d.err = fmt.Errorf("%s: unknown encoding version %d", what, v)
	}
}

// done returns the decode error, and an error for trailing bytes.
func (d *dec) done(what string) error {
	if d.err != nil {
		return fmt.Errorf("%s: %w", what, d.err)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%s: %d trailing bytes", what, len(d.b))
	}
	return nil
}

func u64key(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
