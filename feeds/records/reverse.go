package records

import (
	"net/netip"
	"strconv"
	"strings"
)

// reverseName returns the PTR owner name of an address (lower case, fully
// qualified) and the reverse zone it lives in (without the trailing dot).
// The zones are the reference's: a /24 for IPv4 (4.3.2.1.in-addr.arpa in
// 3.2.1.in-addr.arpa) and a /64 for IPv6, the first 16 nibbles reversed
// being the zone and the last 16 the leaf.
func reverseName(a netip.Addr) (name, zone string) {
	if a.Is4() {
		b := a.As4()
		zone = strconv.Itoa(int(b[2])) + "." + strconv.Itoa(int(b[1])) + "." +
			strconv.Itoa(int(b[0])) + ".in-addr.arpa"
		return strconv.Itoa(int(b[3])) + "." + zone + ".", zone
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
	// 16 nibbles of "x." make the leaf; the rest, minus the final dot, is
	// the zone.
	zone = strings.TrimSuffix(name[32:], ".")
	return name, zone
}
