package db

import "time"

// SerialLess reports whether serial a comes before b in RFC 1982 serial
// number arithmetic (32 bits). Serials exactly 2^31 apart are incomparable
// and reported as not less.
func SerialLess(a, b uint32) bool {
	return a != b && int32(b-a) > 0
}

// nextSerial returns the serial of a zone's next version: the clock in Unix
// seconds when that is ahead of the last serial, else last+1, so serials
// never repeat or go back, whatever the clock does. Zero is skipped because
// several secondaries treat it as "no serial".
func nextSerial(last uint32, have bool, now time.Time) uint32 {
	t := uint32(now.Unix())
	if !have || SerialLess(last, t) {
		return nonZero(t)
	}
	return nonZero(last + 1)
}

func nonZero(s uint32) uint32 {
	if s == 0 {
		return 1
	}
	return s
}
