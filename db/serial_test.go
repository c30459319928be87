package db

import (
	"testing"
	"time"
)

// SerialLess is RFC 1982 §3.2 comparison for SERIAL_BITS = 32: a comes
// before b when they differ and b-a, modulo 2^32, is below 2^31. Every
// serial comparison in cns goes through it; the cases around the wrap
// are the ones a plain a < b gets wrong.
func TestSerialLess(t *testing.T) {
	const half = 1 << 31
	for _, c := range []struct {
		a, b uint32
		want bool
		why  string
	}{
		{1, 2, true, "plain"},
		{2, 1, false, "plain, reversed"},
		{7, 7, false, "equal"},
		{0, 0, false, "equal zero"},
		{0xFFFFFFFF, 0, true, "wraps: 2^32-1 then 0"},
		{0, 0xFFFFFFFF, false, "wraps, reversed"},
		{0xFFFFFFFF, 5, true, "wraps past zero"},
		{0xFFFFFF00, 0x100, true, "512 apart across the wrap"},
		{0x100, 0xFFFFFF00, false, "512 apart across the wrap, reversed"},
		{1795487250, 1795487280, true, "today's serials"},
		{0, half - 1, true, "the largest step forward"},
		{half - 1, 0, false, "the largest step forward, reversed"},
		{0, half, false, "2^31 apart: undefined, not less"},
		{half, 0, false, "2^31 apart the other way: not less either"},
		{10, 10 + half, false, "2^31 apart, elsewhere"},
		{0, half + 1, false, "past half: b is behind"},
		{half + 1, 0, true, "past half, reversed: 0 is ahead"},
		{0x80000000, 0x80000001, true, "around 2^31"},
		{0x7FFFFFFF, 0x80000000, true, "across 2^31"},
	} {
		if got := SerialLess(c.a, c.b); got != c.want {
			t.Errorf("SerialLess(%d, %d) = %v, want %v (%s)", c.a, c.b, got, c.want, c.why)
		}
	}
}

// A zone's next serial follows the clock when it is ahead and last+1
// otherwise, across the wrap too, and is never zero.
func TestNextSerial(t *testing.T) {
	at := func(s uint32) time.Time { return time.Unix(int64(s), 0) }
	for _, c := range []struct {
		last uint32
		have bool
		now  time.Time
		want uint32
	}{
		{0, false, at(1000), 1000},
		{999, true, at(1000), 1000},
		{1000, true, at(1000), 1001},
		{5000, true, at(1000), 5001},
		{0xFFFFFFFF, true, at(1000), 1000},    // the clock is ahead across the wrap
		{0xFFFFFFFF, true, at(0xFFFFFF00), 1}, // behind: last+1 wraps to 0, which is skipped
		{0xFFFFFFFE, true, at(0xFFFFFF00), 0xFFFFFFFF},
		{100, true, at(100 + 1<<31), 101}, // 2^31 ahead is not "ahead"
	} {
		if got := nextSerial(c.last, c.have, c.now); got != c.want {
			t.Errorf("nextSerial(%d, %v, %d) = %d, want %d", c.last, c.have, c.now.Unix(), got, c.want)
		}
	}
}
