package serve

import (
	"net/netip"
	"time"

	"github.com/tritondatacenter/cns/admin/status"
)

// Peers are secondaries, not every client. A zone transfer proves only
// that someone asked for the zone: monitoring, operators and scripts
// transfer zones too, and a secondary on the same host (triton-prometheus
// runs BIND on 127.0.0.1) listens on a port cns cannot know. So:
//   - a loopback client is never tracked, NOTIFYed or probed unless the
//     config names it (a zone's peers, also_notify);
//   - any other client that transfers a zone is asked for the zone's SOA
//     on port 53 a moment later (the reference waits 2 s); it becomes a
//     peer (listed, NOTIFYed, counted in propagation) only once it gives
//     an authoritative answer;
//   - a learned peer whose NOTIFYs go unanswered is NOTIFYed less and
//     less often (the wait doubles up to an hour; it is never given up
//     for good) and leaves propagation until it answers again;
//   - configured peers and also_notify targets are NOTIFYed and counted
//     whatever they answer, and never dropped.

// PeerState is where a learned secondary stands with cns.
type PeerState string

const (
	// PeerProbing: it transferred a zone, and has not answered cns's SOA
	// probe on port 53 yet: not a peer (not listed, NOTIFYed or counted).
	PeerProbing PeerState = "probing"
	// PeerAnswering: it answered the probe or a NOTIFY: NOTIFYed after
	// every change, counted in propagation.
	PeerAnswering PeerState = status.PeerAnswering
	// PeerSilent: its last peerSilentAfter NOTIFYs went unanswered: one
	// NOTIFY per backoff, not counted in propagation, until it answers.
	PeerSilent PeerState = status.PeerSilent
)

// peerEvent is what moves a peer from one state to another.
type peerEvent uint8

const (
	probeAnswered    peerEvent = iota // an authoritative SOA answer to the probe
	probeUnanswered                   // no answer, or not an authoritative one
	notifyAnswered                    // a NOERROR answer to a NOTIFY
	notifyUnanswered                  // no answer before the retransmission, or a refusal
)

const (
	// peerSilentAfter is how many NOTIFYs in a row a learned peer may
	// leave unanswered before it is silent (the reference's limit).
	peerSilentAfter = 5
	// A silent peer gets one NOTIFY per backoff: from silentBackoffMin,
	// doubling with each unanswered one, up to silentBackoffMax.
	silentBackoffMin = time.Minute
	silentBackoffMax = time.Hour
	// probeDelay is the wait between a transfer and the probe, for the
	// secondary to load what it transferred (the reference's 2 s).
	probeDelay = 2 * time.Second
	// A client that never answered is probed again after its next
	// transfer, once probeBackoffMin has passed, doubling up to
	// probeBackoffMax: a script that transfers every minute is not probed
	// every minute.
	probeBackoffMin = time.Minute
	probeBackoffMax = time.Hour
	// A candidate that stops transferring is forgotten after
	// candidateTTL; at most maxCandidates are kept.
	candidateTTL  = 24 * time.Hour
	maxCandidates = 1024
)

// on applies an event that happened at now.
func (p *Peer) on(e peerEvent, now time.Time) {
	switch e {
	case probeAnswered:
		p.ProbeFailures, p.ProbedAt = 0, now
		p.NotifyFailures = 0
		p.State = PeerAnswering
	case probeUnanswered:
		p.ProbeFailures++
		p.ProbedAt = now
	case notifyAnswered:
		p.NotifyFailures = 0
		p.State = PeerAnswering
	case notifyUnanswered:
		p.NotifyFailures++
		p.NotifyFailedAt = now
		if p.State == PeerAnswering && p.NotifyFailures >= peerSilentAfter {
			p.State = PeerSilent
		}
	}
}

// notifyPlan says how the peer is NOTIFYed: how many tries an
// announcement gets, and not before when. ok is false for a client that is
// no peer yet. A configured peer is NOTIFYed whatever its state.
func (p *Peer) notifyPlan(configured bool) (tries int, notBefore time.Time, ok bool) {
	switch {
	case configured || p.State == PeerAnswering:
		return notifyMaxTries, time.Time{}, true
	case p.State == PeerSilent:
		wait := backoff(silentBackoffMin, silentBackoffMax, p.NotifyFailures-peerSilentAfter)
		return 1, p.NotifyFailedAt.Add(wait), true
	}
	return 0, time.Time{}, false
}

// probeDue reports whether a transfer at now is followed by a probe: always
// for a peer, with backoff for a client that never answered.
func (p *Peer) probeDue(now time.Time) bool {
	if p.State != PeerProbing || p.ProbeFailures == 0 {
		return true
	}
	return !now.Before(p.ProbedAt.Add(backoff(probeBackoffMin, probeBackoffMax, p.ProbeFailures-1)))
}

// backoff is min doubled n times, at most max.
func backoff(lo, hi time.Duration, n int) time.Duration {
	d := lo
	for range max(n, 0) {
		if d >= hi {
			break
		}
		d *= 2
	}
	return min(d, hi)
}

// legacyState is the state of a peer stored before states existed: every
// client that transferred was NOTIFYed then. A loopback one was never a
// peer (it is dropped unless configured); any other starts answering, or
// silent when its NOTIFYs already went unanswered.
func legacyState(addr netip.Addr, p *Peer) PeerState {
	switch {
	case addr.IsLoopback():
		return PeerProbing
	case p.NotifyFailures >= peerSilentAfter:
		return PeerSilent
	}
	return PeerAnswering
}
