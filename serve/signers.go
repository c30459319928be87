package serve

import (
	"net/netip"
	"slices"
	"time"

	"github.com/tritondatacenter/cns/db"
)

// Signing secondaries (issue 22). A secondary that signs cns's zones with
// DNSSEC (Knot's dnssec-signing on a secondary zone, BIND's inline-signing
// with a dnssec-policy) serves them under serials of its own: Knot's
// serial policy increments on every signing, BIND keeps a separate signed
// serial. Its SOA answer never names one of cns's serials, so judging it by
// that answer reports a lag that is not there. cns judges such a peer by
// what it transferred instead: the peer serves the serial it had
// transferred from cns when its own serial last advanced. A signer that
// stops transferring still lags: its transferred serial stays behind.

// sentKept is how many transfer end serials are kept per peer and zone.
const sentKept = 8

// sent notes that a transfer to the peer ended at serial.
func (z *PeerZone) sent(serial uint32) {
	z.TransferSerial = serial
	if n := len(z.Sent); n > 0 && z.Sent[n-1] == serial {
		return
	}
	z.Sent = append(z.Sent, serial)
	if len(z.Sent) > sentKept {
		z.Sent = slices.Delete(z.Sent, 0, len(z.Sent)-sentKept)
	}
}

// forcedSigner reports whether config names addr a signer.
func (s *Server) forcedSigner(addr netip.Addr) bool {
	return slices.Contains(s.cfg.Signers, addr.Unmap())
}

// observeSOA records that the peer at addr answered serial for zone's SOA
// and returns which of cns's serials it serves, and whether it is a
// signer. A peer that never transferred the zone is taken at its word
// (and not recorded: it is no peer of cns's yet).
func (t *peerTracker) observeSOA(addr netip.Addr, zone string, reported uint32, now time.Time) (uint32, bool) {
	addr = addr.Unmap()
	cur, _ := t.s.ZoneSerial(zone)
	t.mu.Lock()
	defer t.mu.Unlock()
	known := t.peers[addr]
	if known == nil || known.Zones[zone] == nil {
		return reported, false
	}
	z := t.peer(addr).zone(zone)
	if !z.Signer && reported != cur && z.TransferSerial == cur && z.TransferSerial != 0 && !slices.Contains(z.Sent, reported) {
		// It has cns's newest serial, yet answers one cns never sent it.
		z.Signer = true
		t.s.log.Info("peer serves the zone under serials of its own: tracking it as a signer", "peer", addr.String(), "zone", zone, "serial", reported, "transferred", z.TransferSerial)
	}
	if !z.Signer && t.s.forcedSigner(addr) {
		z.Signer = true
	}
	if !z.Signer {
		if db.SerialLess(z.Serial, reported) || z.Serial == reported {
			z.Serial, z.SerialAt = reported, now
		}
		return reported, false
	}
	if reported != z.SignerSerial || z.SignerSerialAt.IsZero() {
		// Its own serial advanced: it has signed what it had transferred.
		z.SignerSerial, z.SignerSerialAt = reported, now
		if z.TransferSerial != 0 && z.TransferSerial != z.Serial {
			z.Serial, z.SerialAt = z.TransferSerial, now
		}
	}
	return z.Serial, true
}
