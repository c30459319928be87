package dc

import (
	"encoding/json"
	"errors"
	"io"
)

// Cutting a JSON document read from a stream into its parts without
// decoding them, so the parts can be decoded apart (and in parallel) and
// only the part being cut is held: an inventory of a million VMs is half
// a gigabyte of JSON. encoding/json would scan each part once to cut it
// and once more to decode it. The cutter checks the syntax of what it
// cuts (braces, brackets, keys, colons and commas) but not the values it
// hands out: those are checked where they are decoded, and
// encoding/json's Unmarshal checks what it is given anyway. (Checking the
// whole document first took 1.3 s of a million-VM inventory's parse, on
// one core while the other waited.)

// errSyntax means the document is not JSON where it was being cut; the
// caller finds out where and why (syntaxError).
var errSyntax = errors.New("not JSON")

// cutter cuts a JSON document read from r.
type cutter struct {
	r   io.Reader
	buf []byte // buf[pos:] is read and not cut yet
	pos int
	eof bool  // r has no more (or failed: err)
	err error // r's failure
}

// readSize is what the cutter reads at a time: an inventory's VMs are a
// few hundred bytes each.
const readSize = 256 << 10

// newCutter returns a cutter of what r reads, size bytes at a time at
// first (more when a part is longer).
func newCutter(r io.Reader, size int) *cutter {
	return &cutter{r: r, buf: make([]byte, 0, max(size, 1))}
}

// more reads more of the document, keeping what is not cut yet, until
// the buffer is full or r ends; it doubles the buffer when what is not
// cut fills it (a part longer than it). It reports whether it read any.
func (c *cutter) more() bool {
	if c.eof {
		return false
	}
	n := copy(c.buf, c.buf[c.pos:])
	c.buf, c.pos = c.buf[:n], 0
	if n == cap(c.buf) {
		c.buf = append(c.buf, make([]byte, n)...)[:n]
	}
	read := 0
	for len(c.buf) < cap(c.buf) {
		m, err := c.r.Read(c.buf[len(c.buf):cap(c.buf)])
		c.buf, read = c.buf[:len(c.buf)+m], read+m
		if err != nil {
			c.eof = true
			if err != io.EOF {
				c.err = err
			}
			break
		}
	}
	return read > 0
}

// peek returns the next byte that is not white space, reading as needed;
// false at the end of the document.
func (c *cutter) peek() (byte, bool) {
	for {
		c.pos = skipSpace(c.buf, c.pos)
		if c.pos < len(c.buf) {
			return c.buf[c.pos], true
		}
		if !c.more() {
			return 0, false
		}
	}
}

// expect consumes the next byte that is not white space when it is b.
func (c *cutter) expect(b byte) bool {
	if next, ok := c.peek(); !ok || next != b {
		return false
	}
	c.pos++
	return true
}

// value cuts the next value: valid until the cutter is used again.
func (c *cutter) value() ([]byte, error) {
	if b, ok := c.peek(); !ok || b == ',' || b == ']' || b == '}' || b == ':' {
		return nil, c.fail() // (no value starts here: reading on would not make one)
	}
	for {
		end, ok := valueEnd(c.buf, c.pos)
		// A value cut at the end of what is read may go on (a number,
		// or one whose end is not read yet).
		if ok && (end < len(c.buf) || c.eof) {
			v := c.buf[c.pos:end]
			c.pos = end
			return v, nil
		}
		if !c.more() {
			return nil, c.fail()
		}
	}
}

// object walks an object: member is called with each key, the cutter at
// its value, which member cuts (value, array).
func (c *cutter) object(member func(key string) error) error {
	if !c.expect('{') {
		return c.fail()
	}
	if c.expect('}') {
		return nil
	}
	for {
		raw, err := c.value()
		if err != nil {
			return err
		}
		var key string
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &key) != nil || !c.expect(':') {
			return c.fail()
		}
		if err := member(key); err != nil {
			return err
		}
		if c.expect('}') {
			return nil
		}
		if !c.expect(',') {
			return c.fail()
		}
	}
}

// array walks an array: elem is called with each element, cut.
func (c *cutter) array(elem func(raw []byte) error) error {
	if !c.expect('[') {
		return c.fail()
	}
	if c.expect(']') {
		return nil
	}
	for {
		raw, err := c.value()
		if err != nil {
			return err
		}
		if err := elem(raw); err != nil {
			return err
		}
		if c.expect(']') {
			return nil
		}
		if !c.expect(',') {
			return c.fail()
		}
	}
}

// end checks that nothing but white space follows.
func (c *cutter) end() error {
	if _, more := c.peek(); more {
		return c.fail()
	}
	return c.err
}

// fail is the error of a document that stopped being JSON where the
// cutter is: its read error, if reading failed.
func (c *cutter) fail() error {
	if c.err != nil {
		return c.err
	}
	return errSyntax
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string starting at b[i] ('"'),
// and false when it does not end before b does.
func stringEnd(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return len(b), false
}

// valueEnd returns the index after the value starting at b[i], if it
// ends before b does: a string, an object or array whose brackets balance
// (not checking that they match), or a run of other characters up to a
// separator. false: no value starts at i, or it does not end.
func valueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, ok := stringEnd(b, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	}
	start := i
	for i < len(b) { // a number, true, false or null
		switch b[i] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			return i, i > start
		}
		i++
	}
	return i, i > start
}
