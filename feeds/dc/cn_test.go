package dc

import (
	"testing"
	"time"
)

// The CN-down rule: with a last_heartbeat, it is the clock; with null
// (deprecated, and null for every CN the answering CNAPI has not heard
// from since it started), the time the feed first saw the CN not running
// is, so that a CN that died before CNAPI restarted is down after the
// rule's hour; with neither, unknown.
func TestServerState(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	iso := func(d time.Duration) *string { s := now.Add(-d).Format(time.RFC3339Nano); return &s }
	for _, tc := range []struct {
		name string
		s    Server
		want CNState
	}{
		{"running", Server{Setup: true, Status: "running"}, CNUp},
		{"not set up", Server{Status: "running"}, CNDown},
		{"booted a minute ago", Server{Setup: true, Status: "running", LastBoot: *iso(time.Minute)}, CNDown},
		{"unknown, heartbeat 59 min ago", Server{Setup: true, Status: "unknown", LastHeartbeat: iso(59 * time.Minute)}, CNUp},
		{"unknown, heartbeat 61 min ago", Server{Setup: true, Status: "unknown", LastHeartbeat: iso(61 * time.Minute)}, CNDown},
		{"unknown, null heartbeat, never timed", Server{Setup: true, Status: "unknown"}, CNUnknown},
		{"unknown, null heartbeat, seen so 59 min", Server{Setup: true, Status: "unknown", NotRunningSince: now.Add(-59 * time.Minute)}, CNUp},
		{"unknown, null heartbeat, seen so 61 min", Server{Setup: true, Status: "unknown", NotRunningSince: now.Add(-61 * time.Minute)}, CNDown},
		{"rebooting, null heartbeat, seen so 61 min", Server{Setup: true, Status: "rebooting", NotRunningSince: now.Add(-61 * time.Minute)}, CNDown},
		{"heartbeat wins over the sighting", Server{Setup: true, Status: "unknown", LastHeartbeat: iso(time.Minute), NotRunningSince: now.Add(-2 * time.Hour)}, CNUp},
	} {
		if got := ServerState(&tc.s, now); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
