package field

import (
	"errors"
	"testing"
)

// Every field reads back what was written; a short read sets the error
// once and later reads return zero; a uvarint must be in its shortest form.
func TestFields(t *testing.T) {
	e := &Encoder{}
	e.U8(7)
	e.U16(0x1234)
	e.U32(0xdeadbeef)
	e.I64(-5)
	e.Uvarint(300)
	e.Bytes16([]byte("ab"))
	e.Bytes32([]byte("cde"))
	e.Str16("fg")
	e.B = AppendStr(e.B, "hij")
	d := &Decoder{B: e.B}
	if d.U8() != 7 || d.U16() != 0x1234 || d.U32() != 0xdeadbeef || d.I64() != -5 || d.Uvarint() != 300 ||
		string(d.Bytes16()) != "ab" || string(d.Bytes32()) != "cde" || d.Str16() != "fg" || d.Str() != "hij" {
		t.Fatal("a field read back differently")
	}
	if err := d.Done("all"); err != nil {
		t.Fatal(err)
	}

	short := &Decoder{B: []byte{0, 5, 'a'}}
	if s := short.Str16(); s != "" || !errors.Is(short.Err, ErrShort) || short.U8() != 0 {
		t.Errorf("a string longer than its bytes: %q, %v", s, short.Err)
	}
	if err := short.Done("short"); err == nil {
		t.Error("Done after a short read: no error")
	}
	left := &Decoder{B: []byte{1, 2}}
	left.U8()
	if err := left.Done("left"); err == nil || err.Error() != "left: 1 trailing bytes" {
		t.Errorf("Done with a byte left: %v", err)
	}
	long := &Decoder{B: []byte{0x80, 0x00}} // 0 in two bytes
	if long.Uvarint(); long.Err == nil {
		t.Error("a uvarint not in its shortest form was read")
	}
}
