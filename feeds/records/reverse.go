package records

import (
	"net/netip"
	"strconv"
	"strings"
)

// Default reverse zone sizes: the reference's /24 for IPv4 and /64 for IPv6.
const (
	DefaultReverseV4Prefix = 24
	DefaultReverseV6Prefix = 64
)

// ValidReverseV4Prefix and ValidReverseV6Prefix say whether a prefix
// length is one cns can cut reverse zones at: whole octets for IPv4 (8,
// 16, 24), 32, 48 or 64 bits for IPv6.
func ValidReverseV4Prefix(p int) bool { return p == 8 || p == 16 || p == 24 }

// ValidReverseV6Prefix: see ValidReverseV4Prefix.
func ValidReverseV6Prefix(p int) bool { return p == 32 || p == 48 || p == 64 }

// reverseName returns the PTR owner name of an address (lower case, fully
// qualified) and the reverse zone it lives in (without the trailing dot).
// v4 and v6 are the reverse zones' prefix lengths (0: the defaults). The
// defaults are the reference's zones: a /24 for IPv4 (4.3.2.1.in-addr.arpa
// in 3.2.1.in-addr.arpa) and a /64 for IPv6, the first 16 nibbles reversed
// being the zone and the last 16 the leaf. With v4 = 8, 4.3.2.1.in-addr.arpa
// lives in 1.in-addr.arpa; with v6 = 48, the zone holds the first 12 nibbles.
func reverseName(a netip.Addr, v4, v6 int) (name, zone string) {
	if a.Is4() {
		if !ValidReverseV4Prefix(v4) {
			v4 = DefaultReverseV4Prefix
		}
		b := a.As4()
		var s strings.Builder
		s.Grow(len("255.255.255.255.in-addr.arpa."))
		for i := 3; i >= 0; i-- {
			s.WriteString(strconv.Itoa(int(b[i])))
			s.WriteByte('.')
		}
		s.WriteString("in-addr.arpa.")
		name = s.String()
		// The leaf is the 4 - v4/8 octets the zone does not hold.
		cut := 0
		for range 4 - v4/8 {
			cut += strings.IndexByte(name[cut:], '.') + 1
		}
		return name, strings.TrimSuffix(name[cut:], ".")
	}
	if !ValidReverseV6Prefix(v6) {
		v6 = DefaultReverseV6Prefix
	}
	const hex = "0123456789abcdef"
	b := a.As16()
	var s strings.Builder
	s.Grow(64 + len("ip6.arpa."))
	for i := len(b) - 1; i >= 0; i-- {
		s.WriteByte(hex[b[i]&0xf])
		s.WriteByte('.')
		s.WriteByte(hex[b[i]>>4])
		s.WriteByte('.')
	}
	s.WriteString("ip6.arpa.")
	name = s.String()
	// Each nibble is "x.": the leaf is the 32 - v6/4 nibbles the zone does
	// not hold; the rest, minus the final dot, is the zone.
	zone = strings.TrimSuffix(name[2*(32-v6/4):], ".")
	return name, zone
}
