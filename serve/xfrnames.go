package serve

import (
	"encoding/binary"

	"github.com/miekg/dns"
)

// nameDict compresses the names of one transfer message (RFC 1035
// §4.1.4): every name suffix written so far, by a hash of its wire form,
// with the offset it starts at. A name is written as the labels the
// message does not hold yet followed by a pointer to the longest suffix it
// does. Hash collisions cost nothing but a missed pointer: a candidate is
// compared with the message's bytes before it is used.
//
// The dictionary is an open-addressing array tagged with a generation, so
// starting the next message (reset) clears nothing: a transfer writes
// thousands of messages. It starts small (an IXFR of one VM holds a few
// dozen names) and doubles while a message fills it.
type nameDict struct {
	slots []dictSlot
	gen   uint32
	used  int
	last  lastName
	// put's labels and suffix hashes, here rather than on its stack,
	// which Go would clear (1 KB) on every call.
	pos [128]uint8
	hs  [128]uint64
}

type dictSlot struct {
	hash uint64
	gen  uint32
	off  uint16
}

// Dictionary sizes: a message can hold at most one suffix per two bytes
// below maxPointer, so maxDictSlots keeps the load under one half.
const (
	minDictSlots = 64
	maxDictSlots = 16384
)

func (d *nameDict) reset() {
	if d.slots == nil {
		d.slots = make([]dictSlot, minDictSlots)
	}
	d.gen++
	d.used = 0
	if d.gen == 0 { // wrapped: old tags could look current
		clear(d.slots)
		d.gen = 1
		d.last.n = 0
	}
}

func (d *nameDict) get(h uint64) (int, bool) {
	mask := uint64(len(d.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := &d.slots[i]
		if sl.gen != d.gen {
			return 0, false
		}
		if sl.hash == h {
			return int(sl.off), true
		}
	}
}

func (d *nameDict) set(h uint64, off int) {
	if d.used >= len(d.slots)/2 {
		if len(d.slots) >= maxDictSlots {
			return
		}
		d.grow()
	}
	mask := uint64(len(d.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := &d.slots[i]
		if sl.gen != d.gen {
			*sl = dictSlot{hash: h, gen: d.gen, off: uint16(off)}
			d.used++
			return
		}
		if sl.hash == h {
			sl.off = uint16(off)
			return
		}
	}
}

// grow doubles the array, keeping this message's entries.
func (d *nameDict) grow() {
	old, gen := d.slots, d.gen
	// The generation stays: lastName's offsets are tagged with it.
	d.slots, d.used = make([]dictSlot, 2*len(old)), 0
	for _, sl := range old {
		if sl.gen == gen {
			d.set(sl.hash, int(sl.off))
		}
	}
}

// labelHash mixes one label (its length byte and bytes) into h, eight
// bytes at a time.
func labelHash(h uint64, label []byte) uint64 {
	const m = 0x9E3779B97F4A7C15
	for len(label) >= 8 {
		h = (h ^ binary.LittleEndian.Uint64(label)) * m
		h ^= h >> 29
		label = label[8:]
	}
	var w uint64
	for i, c := range label {
		w |= uint64(c) << (8 * i)
	}
	h = (h ^ w ^ uint64(len(label))<<59) * m
	return h ^ h>>32
}

// suffixHashes fills pos with the offset of every label of the absolute
// wire name and hs with a hash of the suffix starting there (labels mixed
// from the root up). It returns the number of labels, or -1 if name is
// not a well-formed wire name.
func suffixHashes(name []byte, pos *[128]uint8, hs *[128]uint64) int {
	var none lastName
	n, _ := none.suffixHashes(name, pos, hs)
	return n
}

// lastName is the name a dictionary put last: its labels, suffix hashes
// and, where known, an offset in the message where each of its suffixes
// can be pointed at (-1: unknown). Consecutive names of a transfer share
// most of their labels (<vm>.inst.<owner>.<zone>, then the next VM of the
// owner): the hashes of the shared suffix are taken from here instead of
// computed again, and its offset, known to hold that suffix, is used
// without comparing it with the message again.
type lastName struct {
	gen  uint32 // the dictionary generation off belongs to
	n    int    // labels; 0: none
	size int
	name [255]byte
	pos  [128]uint8
	hs   [128]uint64
	off  [128]int32
}

// suffixHashes is the package's suffixHashes, reusing the hashes of the
// suffix name shares with l. shared is the first label of that suffix (n
// when there is none); the suffix is l's labels from shared+l.n-n on.
func (l *lastName) suffixHashes(name []byte, pos *[128]uint8, hs *[128]uint64) (n, shared int) {
	i := 0
	for {
		if i >= len(name) || n == len(pos) {
			return -1, 0
		}
		c := int(name[i])
		if c == 0 {
			break
		}
		if c > 63 || i+c+1 >= len(name) {
			return -1, 0
		}
		pos[n] = uint8(i)
		n++
		i += c + 1
	}
	end, lend := i, l.size-1 // the root labels
	shared = n
	if n >= 2 && l.n == n && string(name[pos[1]:end]) == string(l.name[l.pos[1]:lend]) {
		// The common case in a transfer, the owner's next name below
		// the same label: one comparison instead of one per label.
		copy(hs[1:n], l.hs[1:n])
		shared, end = 1, int(pos[1])
		if string(name[:end]) == string(l.name[:l.pos[1]]) {
			shared, hs[0], end = 0, l.hs[0], 0
		}
	} else {
		for k, j := n-1, l.n-1; k >= 0 && j >= 0; k, j = k-1, j-1 {
			if string(name[pos[k]:end]) != string(l.name[l.pos[j]:lend]) {
				break
			}
			shared, hs[k] = k, l.hs[j]
			end, lend = int(pos[k]), int(l.pos[j])
		}
	}
	h := uint64(0x243F6A8885A308D3)
	if shared < n {
		h = hs[shared]
	}
	for k := shared - 1; k >= 0; k-- {
		h = labelHash(h, name[pos[k]:end])
		end = int(pos[k])
		hs[k] = h
	}
	return n, shared
}

// remember makes name, put at start in the message of generation gen, the
// last name: its suffixes from label match on are at ptr (match < n), the
// ones before it were written there. Offsets of the suffix shared with the
// previous last name (labels from shared on) carry over within a message.
func (l *lastName) remember(name []byte, pos *[128]uint8, hs *[128]uint64, n, shared, match, start, ptr int, gen uint32) {
	if len(name) > len(l.name) {
		l.n = 0
		return
	}
	carry := l.gen == gen && l.n > 0
	delta := l.n - n // l's label j is name's label j-delta
	offAt := func(k int) int32 {
		switch {
		case k < match:
			if o := start + int(pos[k]); o <= maxPointer {
				return int32(o)
			}
			return -1
		case k == match:
			return int32(ptr)
		case carry && k >= shared:
			return l.off[k+delta]
		}
		return -1
	}
	// l.off is rewritten in place: read each old entry before it is
	// overwritten.
	if delta >= 0 {
		for k := 0; k < n; k++ {
			l.off[k] = offAt(k)
		}
	} else {
		for k := n - 1; k >= 0; k-- {
			l.off[k] = offAt(k)
		}
	}
	copy(l.name[:], name)
	copy(l.pos[:n], pos[:n])
	copy(l.hs[:n], hs[:n])
	l.gen, l.n, l.size = gen, n, len(name)
}

// put appends name, compressed, to msg and remembers its new suffixes.
// at is where the name can be pointed at: where it was written, or, when
// it was written as nothing but a pointer, where that pointer leads (no
// pointer to a pointer).
func (d *nameDict) put(msg, name []byte) (out []byte, at int) {
	pos, hs := &d.pos, &d.hs
	n, shared := d.last.suffixHashes(name, pos, hs)
	if n < 0 {
		d.last.n = 0
		return append(msg, name...), len(msg)
	}
	known := int32(-1) // where the suffix shared with the last name is
	if shared < n && d.last.gen == d.gen {
		known = d.last.off[shared+d.last.n-n]
	}
	match, ptr := n, 0
	for k := range n {
		if k == shared && known >= 0 {
			match, ptr = k, int(known)
			break
		}
		if off, ok := d.get(hs[k]); ok && sameName(msg, off, name[pos[k]:]) {
			match, ptr = k, off
			break
		}
	}
	start := len(msg)
	at = start
	if match == 0 {
		at = ptr
	}
	if match == n {
		msg = append(msg, name...)
	} else {
		msg = append(msg, name[:pos[match]]...)
		msg = append(msg, byte(0xC0|ptr>>8), byte(ptr))
	}
	for k := range match {
		if o := start + int(pos[k]); o <= maxPointer {
			d.set(hs[k], o)
		}
	}
	d.last.remember(name, pos, hs, n, shared, match, start, ptr, d.gen)
	return msg, at
}

// sameName reports whether the (possibly compressed) name at off in msg
// is name, byte for byte.
func sameName(msg []byte, off int, name []byte) bool {
	i := 0
	for hops := 0; hops < 128; {
		if off >= len(msg) || i >= len(name) {
			return false
		}
		l := int(msg[off])
		if l&0xC0 == 0xC0 {
			if off+1 >= len(msg) {
				return false
			}
			off = (l&0x3F)<<8 | int(msg[off+1])
			hops++
			continue
		}
		if l != int(name[i]) || off+l >= len(msg) || i+l >= len(name) {
			return false
		}
		if l == 0 {
			return true
		}
		if string(msg[off+1:off+1+l]) != string(name[i+1:i+1+l]) {
			return false
		}
		off += l + 1
		i += l + 1
	}
	return false
}

// putRR appends an owner-less record (db.RRs form: type, class, TTL,
// RDLENGTH, RDATA) to msg, compressing the names in the RDATA of the
// types RFC 1035 defines with compressible names (NS, CNAME, PTR, MX,
// SOA). Other types, SRV's target among them (RFC 2782), are copied as
// stored.
func (d *nameDict) putRR(msg, rr []byte) []byte {
	if len(rr) < 10 {
		return append(msg, rr...)
	}
	var fixed, names int // bytes before the first name, names to compress
	switch binary.BigEndian.Uint16(rr) {
	case dns.TypeNS, dns.TypeCNAME, dns.TypePTR:
		names = 1
	case dns.TypeMX:
		fixed, names = 2, 1
	case dns.TypeSOA:
		names = 2
	default:
		return append(msg, rr...)
	}
	rdata := rr[10:]
	if len(rdata) < fixed || int(binary.BigEndian.Uint16(rr[8:])) != len(rdata) {
		return append(msg, rr...)
	}
	mark := len(msg)
	msg = append(msg, rr[:10]...)
	msg = append(msg, rdata[:fixed]...)
	p := fixed
	for range names {
		l := wireNameLen(rdata[p:])
		if l < 0 {
			d.last.n = 0 // its offsets may lie in what is cut off
			return append(msg[:mark], rr...)
		}
		msg, _ = d.put(msg, rdata[p:p+l])
		p += l
	}
	msg = append(msg, rdata[p:]...)
	binary.BigEndian.PutUint16(msg[mark+8:], uint16(len(msg)-mark-10))
	return msg
}

// wireNameLen is the length of the uncompressed wire name b starts with,
// or -1.
func wireNameLen(b []byte) int {
	for i := 0; i < len(b); {
		l := int(b[i])
		if l == 0 {
			return i + 1
		}
		if l > 63 {
			return -1
		}
		i += l + 1
	}
	return -1
}
