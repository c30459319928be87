package db

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// Names inside the store are DNS wire names in lower case. A name stored
// under a zone is keyed by its labels relative to the zone, in reverse
// order, each length-prefixed: a.b.zone → "\x01b\x01a". So a name's
// descendants sort directly after it and share its key as a prefix, which
// is what tells an empty non-terminal from a name that does not exist.

// ZoneWire returns the wire form of a zone name given without the trailing
// dot ("example.com" → "\x07example\x03com\x00").
func ZoneWire(zone string) ([]byte, error) {
	return wireName(dns.Fqdn(zone))
}

// wireName packs a presentation name into lower-case wire format.
func wireName(name string) ([]byte, error) {
	var buf [256]byte
	n, err := dns.PackDomainName(dns.Fqdn(name), buf[:], 0, nil, false)
	if err != nil {
		return nil, fmt.Errorf("name %q: %w", name, err)
	}
	return lowerASCII(bytes.Clone(buf[:n])), nil // not the whole buffer: names are kept
}

// lowerASCII lower-cases b in place and returns it. Length octets of wire
// names are below 64, so they are never touched.
func lowerASCII(b []byte) []byte {
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return b
}

// relativeKey returns the store key of owner (absolute wire name) inside
// zone (absolute wire name), and false when owner is not strictly below
// the zone.
func relativeKey(owner, zone []byte) ([]byte, bool) {
	key, below := appendRelativeKey(nil, owner, zone)
	if !below {
		return nil, false
	}
	return key, true
}

// appendRelativeKey is relativeKey appending the key to dst (returned
// unchanged when owner is not below the zone).
func appendRelativeKey(dst, owner, zone []byte) ([]byte, bool) {
	if len(owner) <= len(zone) || !bytes.Equal(owner[len(owner)-len(zone):], zone) {
		return dst, false
	}
	rel := owner[:len(owner)-len(zone)]
	// The suffix must start on a label boundary.
	var startsBuf [128]int // a name has at most 127 labels: no allocation
	starts := startsBuf[:0]
	for i := 0; i < len(rel); {
		starts = append(starts, i)
		i += int(rel[i]) + 1
		if i > len(rel) {
			return dst, false
		}
		if i == len(rel) {
			break
		}
	}
	dst = slices.Grow(dst, len(rel))
	for j := len(starts) - 1; j >= 0; j-- {
		s := starts[j]
		dst = append(dst, rel[s:s+int(rel[s])+1]...)
	}
	return dst, true
}

// keyToWire turns a relative key back into an absolute wire name.
func keyToWire(key, zone []byte) []byte {
	return appendKeyWire(make([]byte, 0, len(key)+len(zone)), key, zone)
}

// appendKeyWire is keyToWire into out's storage.
func appendKeyWire(out, key, zone []byte) []byte {
	var startsBuf [128]int // a name has at most 127 labels: no allocation
	starts := startsBuf[:0]
	for i := 0; i < len(key); i += int(key[i]) + 1 {
		starts = append(starts, i)
	}
	for j := len(starts) - 1; j >= 0; j-- {
		s := starts[j]
		// A damaged key (a label running past its end) gives a damaged
		// name, which decoders report, rather than a panic.
		out = append(out, key[s:min(s+int(key[s])+1, len(key))]...)
	}
	return append(out, zone...)
}

// relativeWire is the owner's labels below the zone in wire order, without
// the zone suffix (used in journal entries; empty for the apex).
func relativeWire(owner, zone []byte) []byte {
	return owner[:len(owner)-len(zone)]
}

// WireToString renders a wire name in presentation format with the
// trailing dot.
func WireToString(w []byte) string {
	name, _, err := dns.UnpackDomainName(w, 0)
	if err != nil {
		return fmt.Sprintf("<bad name %x>", w)
	}
	return name
}

// isReverseZone reports whether zone (without trailing dot) is a reverse
// mapping zone.
func isReverseZone(zone string) bool {
	return strings.HasSuffix(zone, ".in-addr.arpa") || strings.HasSuffix(zone, ".ip6.arpa")
}
