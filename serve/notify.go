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
	limit    int // tries this announcement gets (the target's plan)
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
			n.queue(acc, zu.Zone, to, zu.Serial)
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
		n.queue(acc, zone, to, serial)
	}
	n.mu.Unlock()
	n.poke()
}

// targetsOf is where a change of zone is announced: the configured
// targets, and the learned peers that transferred it (answering or
// silent: see peerstate.go), on port 53.
func (n *notifier) targetsOf(acc *access, zone string) []netip.AddrPort {
	return n.s.peerTargets(acc, zone, true)
}

// peerTargets is the configured targets of zone plus the learned peers
// that transferred it: those answering, and with silent those silent too.
func (s *Server) peerTargets(acc *access, zone string, silent bool) []netip.AddrPort {
	out := acc.notifyTargets(zone)
	known := map[netip.Addr]bool{}
	for _, t := range out {
		known[t.Addr().Unmap()] = true
	}
	for _, a := range s.peers.learned(zone, silent) {
		if !known[a] {
			out = append(out, netip.AddrPortFrom(a, s.peers.port))
		}
	}
	return out
}

// expectedTargets is where zone's changes are expected to be served: the
// configured targets and the learned peers that answer. Propagation and
// the serial check follow these.
func (s *Server) expectedTargets(acc *access, zone string) []netip.AddrPort {
	return s.peerTargets(acc, zone, false)
}

// queue schedules a NOTIFY of serial, as the target's plan allows
// (peerstate.go); a burst of commits leaves one NOTIFY per
// min_notify_interval. Callers hold mu.
func (n *notifier) queue(acc *access, zone string, to netip.AddrPort, serial uint32) {
	limit, notBefore, ok := n.s.peers.notifyPlan(acc, to.Addr())
	if !ok {
		return
	}
	k := notifyKey{zone, to}
	st := n.targets[k]
	if st == nil {
		st = &notifyState{}
		n.targets[k] = st
	}
	st.serial = serial
	st.tries, st.limit = 0, limit
	if st.inFlight != 0 && !st.next.IsZero() {
		// The NOTIFY in flight has until its retransmission to be
		// answered; the retransmission, or the NOTIFY that follows its
		// answer, carries the new serial.
		return
	}
	at := n.s.now()
	if !st.sent.IsZero() && st.sent.Add(n.gap()).After(at) {
		at = st.sent.Add(n.gap())
	}
	if notBefore.After(at) {
		at = notBefore
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
			t.Reset(next.Sub(n.s.now()))
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
// next one is due. A NOTIFY still unanswered when its retransmission is
// due counts against its target (peerstate.go).
func (n *notifier) sendDue() time.Time {
	acc := n.s.access.Load()
	now := n.s.now()
	var next time.Time
	type out struct {
		k  notifyKey
		st notifyState
	}
	var due []out
	n.mu.Lock()
	for k, st := range n.targets {
		if !st.next.IsZero() && !st.next.After(now) {
			if st.inFlight != 0 {
				st.inFlight = 0
				n.s.peers.notifyUnanswered(k.to.Addr(), k.zone)
			}
			if n.sendable(acc, k, st, now) {
				st.tries++
				st.id = uint16(rand.UintN(1 << 16))
				st.sent = now
				st.inFlight = st.serial
				st.next = now.Add(min(notifyFirstRetry<<(st.tries-1), notifyMaxRetry))
				due = append(due, out{k, *st})
			}
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

// sendable decides what a due target gets: a NOTIFY (true), a later time
// (its plan's backoff), or nothing until the next change. Callers hold mu.
func (n *notifier) sendable(acc *access, k notifyKey, st *notifyState, now time.Time) bool {
	if st.acked == st.serial && st.tries == 0 {
		st.next = time.Time{}
		return false
	}
	limit, notBefore, ok := n.s.peers.notifyPlan(acc, k.to.Addr())
	st.limit = min(st.limit, limit)
	switch {
	case !ok:
		st.next = time.Time{}
		return false
	case st.tries >= st.limit:
		n.s.log.Warn("NOTIFY unanswered, giving up until the next change", "zone", k.zone, "peer", k.to.String(), "serial", st.serial, "tries", st.tries)
		st.next = time.Time{}
		return false
	case notBefore.After(now):
		st.next = notBefore
		return false
	}
	return true
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
			st.tries = 0
			if st.serial == serial {
				st.next = time.Time{}
			} else {
				st.next = st.sent.Add(n.gap()) // a newer serial waits no longer
				n.poke()
			}
			if rcode == dns.RcodeSuccess {
				n.s.peers.notifyAnswered(k.to.Addr(), k.zone)
			} else {
				n.s.log.Warn("NOTIFY refused; not retried until the next change", "zone", k.zone, "peer", k.to.String(), "serial", serial,
					"rcode", dns.RcodeToString[rcode])
				n.s.peers.notifyUnanswered(k.to.Addr(), k.zone)
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
