// Package policy is what the configuration tells the DNS server: who may
// transfer which zone and whom to NOTIFY (Transfers), response rate
// limiting (RRL), resolver forwarding (Forwarding), how serials are
// followed to the secondaries (Propagation) and client-scoped answers
// (ClientAnswers).
//
// admin/config parses the keys into these types and serve applies them,
// so each is defined once and nothing converts one into a copy of
// itself. Only package main imports serve (DESIGN), so they live in this
// leaf package, which imports nothing of the project.
package policy

import (
	"net/netip"
	"time"
)

// RRL is response rate limiting as Knot and NSD do it: UDP answers to
// one client network (an IPv4 /24, an IPv6 /56) are limited to a rate;
// beyond it answers are dropped, except every Slip-th, which goes out
// truncated so a real resolver retries over TCP (where nobody can spoof
// it) while a spoofed victim gets nothing worth amplifying. TCP is never
// limited. Key rrl; a reload applies it.
type RRL struct {
	// ResponsesPerSecond per client network; 0 disables RRL.
	ResponsesPerSecond int
	// Slip: every Slip-th limited answer is sent truncated (1: all, 0: none).
	Slip int
	// IPv4Prefix and IPv6Prefix size the client networks (default 24, 56).
	IPv4Prefix, IPv6Prefix int
	// Exempt networks are never limited (monitoring, the secondaries).
	Exempt []netip.Prefix
}

// Forwarding answers the names cns is not authoritative for on behalf of
// chosen clients (the data center's own VMs, say), by asking upstream
// resolvers and caching their answers. Everyone else still gets REFUSED,
// so cns is never an open resolver. It is off unless Clients and
// Upstreams are both set. Key forwarding.
type Forwarding struct {
	// Clients may have their queries forwarded (RD set).
	Clients []netip.Prefix
	// Upstreams are asked in order; the next is tried when one fails.
	Upstreams []netip.AddrPort
	// CacheEntries bounds the cache (default 10000).
	CacheEntries int
	// Timeout per upstream attempt (default 2 s).
	Timeout time.Duration
	// MaxTTL caps how long an answer is cached (default 1 h; no key sets
	// it).
	MaxTTL time.Duration
}

// Propagation tunes the tracking of every serial to the secondaries
// (after OpenStack Designate's pool manager). The zero value is cns's
// defaults, much faster than Designate's (NOTIFY and IXFR from cns take
// milliseconds). Key propagation.
type Propagation struct {
	// ThresholdPercent of a zone's peers must serve a serial for it to be
	// ACTIVE (default 100).
	ThresholdPercent int
	// PollDelay is the wait after a commit before the first SOA poll
	// (default 50 ms), PollInterval between polls (default 200 ms),
	// PollTimeout per poll (default 2 s), PollMaxRetries polls per peer
	// before it is ERROR for the serial (default 20).
	PollDelay      time.Duration
	PollInterval   time.Duration
	PollTimeout    time.Duration
	PollMaxRetries int
	// PeriodicSync re-NOTIFYs and re-polls peers that lag (default 60 s).
	PeriodicSync time.Duration
}

// ClientAnswers is client_answers: owner-less names answered in the
// asking instance's own scope. The updater reads Networks (the addresses
// on them identify the instances); the DNS server answers when they are
// set, and listens on Listen too.
type ClientAnswers struct {
	// Networks are network or pool UUIDs, lower case; none: off.
	Networks []string
	// Listen holds extra addresses on which only client-scoped service is
	// offered: owner-less names, and forwarding for the forwarding
	// clients; everything else is REFUSED there.
	Listen []netip.AddrPort
}

// Enabled reports whether client-scoped answers are on.
func (c ClientAnswers) Enabled() bool { return len(c.Networks) > 0 }

// Key is a TSIG key (RFC 8945), an entry of tsig_keys.
type Key struct {
	Name      string // key name, e.g. "xfr-key" (fully qualified when used)
	Algorithm string // hmac-sha256 (default), hmac-sha1, hmac-sha224, hmac-sha384, hmac-sha512
	Secret    string // base64
}
