package serve

import (
	"strconv"
	"testing"
	"time"
)

// Ensure a peer moves between states as the table says: a client becomes
// a peer only by answering (the probe, or a NOTIFY), a peer goes silent
// at the fifth NOTIFY in a row unanswered, and any answer brings it back.
func TestPeerStateTransitions(t *testing.T) {
	t0 := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		from     PeerState
		failures int // NotifyFailures before
		event    peerEvent
		to       PeerState
		after    int // NotifyFailures after
	}{
		{"client answers the probe", PeerProbing, 0, probeAnswered, PeerAnswering, 0},
		{"client does not answer the probe", PeerProbing, 0, probeUnanswered, PeerProbing, 0},
		{"an unanswered NOTIFY does not make a client a peer", PeerProbing, 7, notifyUnanswered, PeerProbing, 8},
		{"a configured client answers a NOTIFY", PeerProbing, 0, notifyAnswered, PeerAnswering, 0},
		{"a peer answers", PeerAnswering, 3, notifyAnswered, PeerAnswering, 0},
		{"a peer misses one", PeerAnswering, 0, notifyUnanswered, PeerAnswering, 1},
		{"a peer misses its fourth", PeerAnswering, 3, notifyUnanswered, PeerAnswering, 4},
		{"a peer misses its fifth", PeerAnswering, 4, notifyUnanswered, PeerSilent, 5},
		{"a peer's probe goes unanswered", PeerAnswering, 2, probeUnanswered, PeerAnswering, 2},
		{"silent stays silent", PeerSilent, 5, notifyUnanswered, PeerSilent, 6},
		{"silent answers a NOTIFY", PeerSilent, 9, notifyAnswered, PeerAnswering, 0},
		{"silent answers the probe after a transfer", PeerSilent, 9, probeAnswered, PeerAnswering, 0},
		{"silent does not answer the probe", PeerSilent, 9, probeUnanswered, PeerSilent, 9},
	} {
		p := &Peer{State: tc.from, NotifyFailures: tc.failures}
		p.on(tc.event, t0)
		if p.State != tc.to || p.NotifyFailures != tc.after {
			t.Errorf("%s: %s with %d failures → %s with %d, want %s with %d", tc.name, tc.from, tc.failures, p.State, p.NotifyFailures, tc.to, tc.after)
		}
	}
}

// Ensure how a peer is NOTIFYed follows its state: in full when
// configured or answering, not at all before it answered, and a silent
// one once per wait that doubles from a minute up to an hour.
func TestPeerNotifyPlan(t *testing.T) {
	t0 := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		state      PeerState
		failures   int
		configured bool
		tries      int
		wait       time.Duration // after the last failure; -1: no wait
		ok         bool
	}{
		{"client", PeerProbing, 0, false, 0, -1, false},
		{"configured, never answered", PeerProbing, 12, true, notifyMaxTries, -1, true},
		{"answering", PeerAnswering, 4, false, notifyMaxTries, -1, true},
		{"configured and silent", PeerSilent, 30, true, notifyMaxTries, -1, true},
		{"silent after 5", PeerSilent, 5, false, 1, time.Minute, true},
		{"silent after 6", PeerSilent, 6, false, 1, 2 * time.Minute, true},
		{"silent after 8", PeerSilent, 8, false, 1, 8 * time.Minute, true},
		{"silent after 10", PeerSilent, 10, false, 1, 32 * time.Minute, true},
		{"silent after 11: capped", PeerSilent, 11, false, 1, time.Hour, true},
		{"silent after 500: capped", PeerSilent, 500, false, 1, time.Hour, true},
	} {
		p := &Peer{State: tc.state, NotifyFailures: tc.failures, NotifyFailedAt: t0}
		tries, notBefore, ok := p.notifyPlan(tc.configured)
		want := time.Time{}
		if tc.wait >= 0 {
			want = t0.Add(tc.wait)
		}
		if tries != tc.tries || !notBefore.Equal(want) || ok != tc.ok {
			t.Errorf("%s: plan %d tries, not before %v, ok %v; want %d, %v, %v", tc.name, tries, notBefore, ok, tc.tries, want, tc.ok)
		}
	}
}

// Ensure a client that never answered is probed again only after a wait
// that doubles up to an hour, while a peer is probed after every
// transfer; and that the version is asked again within a minute when the
// last probe got no answer, hourly when it did.
func TestPeerProbeAndVersionDue(t *testing.T) {
	t0 := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		p     Peer
		after time.Duration
		probe bool
	}{
		{"new client", Peer{State: PeerProbing}, 0, true},
		{"client, 1 unanswered, 59 s", Peer{State: PeerProbing, ProbeFailures: 1, ProbedAt: t0}, 59 * time.Second, false},
		{"client, 1 unanswered, 60 s", Peer{State: PeerProbing, ProbeFailures: 1, ProbedAt: t0}, time.Minute, true},
		{"client, 3 unanswered, 3 min", Peer{State: PeerProbing, ProbeFailures: 3, ProbedAt: t0}, 3 * time.Minute, false},
		{"client, 3 unanswered, 4 min", Peer{State: PeerProbing, ProbeFailures: 3, ProbedAt: t0}, 4 * time.Minute, true},
		{"client, 40 unanswered, 59 min", Peer{State: PeerProbing, ProbeFailures: 40, ProbedAt: t0}, 59 * time.Minute, false},
		{"client, 40 unanswered, 60 min", Peer{State: PeerProbing, ProbeFailures: 40, ProbedAt: t0}, time.Hour, true},
		{"answering peer", Peer{State: PeerAnswering, ProbeFailures: 4, ProbedAt: t0}, time.Second, true},
	} {
		if got := tc.p.probeDue(t0.Add(tc.after)); got != tc.probe {
			t.Errorf("%s: probe due %v, want %v", tc.name, got, tc.probe)
		}
	}
	for _, tc := range []struct {
		name    string
		p       Peer
		after   time.Duration
		version bool
	}{
		{"never asked", Peer{}, 0, true},
		{"answered 59 min ago", Peer{VersionAt: t0}, 59 * time.Minute, false},
		{"answered an hour ago", Peer{VersionAt: t0}, time.Hour, true},
		{"no answer 59 s ago", Peer{VersionFailures: 1, VersionTriedAt: t0}, 59 * time.Second, false},
		{"no answer a minute ago", Peer{VersionFailures: 1, VersionTriedAt: t0}, time.Minute, true},
		{"no answer twice, a minute ago", Peer{VersionFailures: 2, VersionTriedAt: t0}, time.Minute, false},
		{"no answer twice, 2 min ago", Peer{VersionFailures: 2, VersionTriedAt: t0}, 2 * time.Minute, true},
		{"no answer 20 times, an hour ago", Peer{VersionFailures: 20, VersionTriedAt: t0}, time.Hour, true},
		{"answered before, no answer since", Peer{VersionAt: t0, VersionFailures: 1, VersionTriedAt: t0.Add(time.Minute)}, 2 * time.Minute, true},
	} {
		if got := tc.p.versionDue(t0.Add(tc.after)); got != tc.version {
			t.Errorf("%s: version due %v, want %v", tc.name, got, tc.version)
		}
	}
}

// Ensure a peer stored before states existed gets one: loopback was never
// a peer, others were NOTIFYed and keep that unless they stopped
// answering.
func TestLegacyPeerState(t *testing.T) {
	for _, tc := range []struct {
		addr     string
		failures int
		want     PeerState
	}{
		{"127.0.0.1", 0, PeerProbing},
		{"::1", 0, PeerProbing},
		{"192.0.2.53", 0, PeerAnswering},
		{"192.0.2.53", 4, PeerAnswering},
		{"192.0.2.53", 5, PeerSilent},
	} {
		p, err := StoredPeer([]byte(`{"address":"` + tc.addr + `","notify_failures":` + strconv.Itoa(tc.failures) + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if p.State != tc.want || p.Zones == nil || p.Counters == nil {
			t.Errorf("%s with %d failures: %+v, want state %s", tc.addr, tc.failures, p, tc.want)
		}
	}
	if p, _ := StoredPeer([]byte(`{"address":"192.0.2.53","state":"silent"}`)); p.State != PeerSilent {
		t.Errorf("a stored state is kept: %s", p.State)
	}
}
