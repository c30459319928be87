package policy

import (
	"net/netip"
	"time"
)

// Transfers is who may transfer which zone and whom to NOTIFY, as the
// configuration says it: peers by name or address. The DNS server looks
// the names up (serve.ResolveTransfers) and serves the addresses; a
// reload applies it.
type Transfers struct {
	// AllowTransfer may transfer every zone (allow_transfer; loopback
	// always may).
	AllowTransfer []netip.Prefix
	// MinNotifyInterval spaces NOTIFYs to one peer for one zone.
	MinNotifyInterval time.Duration
	// Zones are the forward zones, in configuration order; Reverse is
	// every reverse zone's. Catalog, when set, names the catalog zone,
	// which every peer of any zone consumes.
	Zones   []ZonePeers
	Reverse ZonePeers
	Catalog string
	// Keys are the TSIG keys (tsig_keys); PeerKeys names the key a peer
	// (by name or address) must sign with (peer_keys).
	Keys     []Key
	PeerKeys map[string]string
}

// ZonePeers are one zone's secondaries.
type ZonePeers struct {
	Zone string // "" for the reverse zones
	// Peers are names or addresses: they may transfer the zone and are
	// notified on port 53.
	Peers []string
	// Notify are NOTIFY targets (also_notify, the zone's and every
	// zone's), which may transfer it too.
	Notify []netip.AddrPort
}
