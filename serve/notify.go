package serve

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

// NOTIFY timing (RFC 1996 §4.3: retransmit with backoff until answered).
const (
	notifyFirstRetry = time.Second
	notifyMaxRetry   = 60 * time.Second
	notifyMaxTries   = 10
	defaultNotifyGap = 500 * time.Millisecond
)

// notifier announces new serials to secondaries: one NOTIFY (with the SOA
// in the answer section) per target and zone per min_notify_interval,
// retransmitted with backoff until the target answers or a newer serial
// replaces it.
type notifier struct {
	s    *Server
	conn *net.UDPConn

	mu      sync.Mutex
	targets map[notifyKey]*notifyState
	wake    chan struct{}
}

type notifyKey struct {
	zone string
	to   netip.AddrPort
}

type notifyState struct {
	serial   uint32 // to announce
	acked    uint32 // last serial the target answered for
	sent     time.Time
	next     time.Time // zero: nothing to do
	tries    int
	id       uint16
	inFlight uint32 // serial of the outstanding NOTIFY
}

func newNotifier(s *Server) (*notifier, error) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{})
	if err != nil {
		return nil, err
	}
	return &notifier{s: s, conn: conn, targets: map[notifyKey]*notifyState{}, wake: make(chan struct{}, 1)}, nil
}

// commit queues NOTIFYs for every zone a commit changed.
func (n *notifier) commit(c *db.Committed) {
	acc := n.s.access.Load()
	n.mu.Lock()
	for _, zu := range c.Zones {
		if zu.Removed {
			for k := range n.targets {
				if k.zone == zu.Zone {
					delete(n.targets, k)
				}
			}
			continue
		}
		if n.s.serials.holds(zu.Zone) {
			continue // announced once the secondaries' serials are known (serialcheck.go)
		}
		for _, to := range n.targetsOf(acc, zu.Zone) {
			n.queue(zu.Zone, to, zu.Serial)
		}
	}
	n.mu.Unlock()
	n.poke()
}

// release announces serial of zone, which the serial check held.
func (n *notifier) release(zone string, serial uint32) {
	acc := n.s.access.Load()
	n.mu.Lock()
	for _, to := range n.targetsOf(acc, zone) {
		n.queue(zone, to, serial)
	}
	n.mu.Unlock()
	n.poke()
}

// targetsOf is the configured targets of zone plus the secondaries that
// transferred it before (on port 53, unless configured with a port).
func (n *notifier) targetsOf(acc *access, zone string) []netip.AddrPort {
	out := acc.notifyTargets(zone)
	known := map[netip.Addr]bool{}
	for _, t := range out {
		known[t.Addr().Unmap()] = true
	}
	for _, a := range n.s.peers.transferredZone(zone) {
		if !known[a] {
			out = append(out, netip.AddrPortFrom(a, 53))
		}
	}
	return out
}

// queue schedules a NOTIFY of serial; a burst of commits leaves one
// NOTIFY per min_notify_interval.
func (n *notifier) queue(zone string, to netip.AddrPort, serial uint32) {
	k := notifyKey{zone, to}
	st := n.targets[k]
	if st == nil {
		st = &notifyState{}
		n.targets[k] = st
	}
	st.serial = serial
	st.tries = 0
	gap := n.gap()
	at := time.Now()
	if !st.sent.IsZero() && st.sent.Add(gap).After(at) {
		at = st.sent.Add(gap)
	}
	st.next = at
}

func (n *notifier) gap() time.Duration {
	if g := time.Duration(n.s.access.Load().MinNotifyInterval); g > 0 {
		return g
	}
	return defaultNotifyGap
}

func (n *notifier) poke() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// run sends due NOTIFYs until ctx ends.
func (n *notifier) run(ctx context.Context) {
	go n.readReplies()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		next := n.sendDue()
		if next.IsZero() {
			t.Reset(time.Hour)
		} else {
			t.Reset(time.Until(next))
		}
		select {
		case <-ctx.Done():
			n.conn.Close()
			return
		case <-n.wake:
		case <-t.C:
		}
	}
}

// sendDue sends every NOTIFY whose time has come and returns when the
// next one is due.
func (n *notifier) sendDue() time.Time {
	now := time.Now()
	var next time.Time
	type out struct {
		k  notifyKey
		st notifyState
	}
	var due []out
	n.mu.Lock()
	for k, st := range n.targets {
		if st.next.IsZero() {
			continue
		}
		if st.acked == st.serial && st.tries == 0 && st.inFlight == 0 {
			st.next = time.Time{}
			continue
		}
		if !st.next.After(now) {
			if st.tries >= notifyMaxTries {
				n.s.log.Warn("NOTIFY unanswered, giving up until the next change", "zone", k.zone, "peer", k.to.String(), "serial", st.serial, "tries", st.tries)
				n.s.peers.notifyFailed(k.to.Addr(), k.zone)
				st.next = time.Time{}
				continue
			}
			st.tries++
			st.id = uint16(rand.UintN(1 << 16))
			st.sent = now
			st.inFlight = st.serial
			backoff := min(notifyFirstRetry<<(st.tries-1), notifyMaxRetry)
			st.next = now.Add(backoff)
			due = append(due, out{k, *st})
		}
		if !st.next.IsZero() && (next.IsZero() || st.next.Before(next)) {
			next = st.next
		}
	}
	n.mu.Unlock()
	for _, d := range due {
		n.send(d.k, d.st)
	}
	return next
}

// send writes one NOTIFY.
func (n *notifier) send(k notifyKey, st notifyState) {
	acc := n.s.access.Load()
	z := n.s.zoneByName(k.zone)
	if z == nil {
		return
	}
	m := new(dns.Msg)
	m.SetNotify(dns.Fqdn(k.zone))
	m.Id = st.id
	m.Answer = []dns.RR{z.apex.SOA(k.zone, st.serial)}
	msg, err := m.Pack()
	if err != nil {
		n.s.log.Error("NOTIFY pack", "zone", k.zone, "err", err)
		return
	}
	if key := acc.requiredKey(k.to.Addr()); key != nil {
		msg, _ = key.sign(msg, nil, false, time.Now())
	}
	if _, err := n.conn.WriteToUDPAddrPort(msg, k.to); err != nil {
		n.s.log.Warn("NOTIFY send", "zone", k.zone, "peer", k.to.String(), "err", err)
	}
	n.s.peers.notifySent(k.to.Addr(), k.zone, st.serial)
}

// readReplies matches NOTIFY answers to their targets.
func (n *notifier) readReplies() {
	buf := make([]byte, 4096)
	for {
		l, from, err := n.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if isClosed(err) {
				return
			}
			continue
		}
		if l < headerLen || buf[2]&0x80 == 0 {
			continue
		}
		id := binary.BigEndian.Uint16(buf)
		rcode := int(buf[3] & 0x0F)
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		n.mu.Lock()
		for k, st := range n.targets {
			if k.to != from || st.id != id || st.inFlight == 0 {
				continue
			}
			serial := st.inFlight
			st.inFlight = 0
			// Any answer means the peer got it: retransmitting cannot change
			// a refusal (RFC 1996 §4.7), so the NOTIFY is done either way.
			st.acked = serial
			if st.serial == serial {
				st.next = time.Time{}
				st.tries = 0
			}
			if rcode == dns.RcodeSuccess {
				n.s.peers.notifyAcked(k.to.Addr(), k.zone, serial)
			} else {
				n.s.log.Warn("NOTIFY refused; not retried until the next change", "zone", k.zone, "peer", k.to.String(), "rcode", dns.RcodeToString[rcode])
				n.s.peers.notifyFailed(k.to.Addr(), k.zone)
			}
		}
		n.mu.Unlock()
	}
}

// pending lists targets still waiting for an answer, for status output.
func (n *notifier) pending() map[notifyKey]notifyState {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[notifyKey]notifyState{}
	for k, st := range n.targets {
		out[k] = *st
	}
	return out
}
