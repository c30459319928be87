package dc

import "time"

// CN-down thresholds of the reference implementation (CNS-100, CNS-149).
const (
	HeartbeatStale = time.Hour       // status not running and no heartbeat for this long: down
	RecentBoot     = 2 * time.Minute // booted this recently: down (instances not settled yet)
)

// CNState is what cns concludes about a compute node.
type CNState int

const (
	CNUp      CNState = iota
	CNDown            // its instances leave service names
	CNUnknown         // not enough information: keep the previous state
)

func (s CNState) String() string {
	switch s {
	case CNUp:
		return "up"
	case CNDown:
		return "down"
	}
	return "unknown"
}

// ServerState applies the reference's CN-down rule at now, with its known
// bugs fixed: a null last_heartbeat (CNAPI just restarted, or another CNAPI
// instance got the heartbeats) is unknown rather than down, and a last_boot
// in the future does not count as a recent boot.
//
//	down = (status != running && heartbeat older than 1 h) || booted < 2 min ago
//	an unsetup server is down.
func ServerState(s *Server, now time.Time) CNState {
	if !s.Setup {
		return CNDown
	}
	if boot, err := time.Parse(time.RFC3339Nano, s.LastBoot); err == nil {
		if age := now.Sub(boot); age >= 0 && age < RecentBoot {
			return CNDown
		}
	}
	if s.Status == "running" {
		return CNUp
	}
	if s.LastHeartbeat == nil {
		return CNUnknown
	}
	hb, err := time.Parse(time.RFC3339Nano, *s.LastHeartbeat)
	if err != nil {
		return CNUnknown
	}
	if now.Sub(hb) > HeartbeatStale {
		return CNDown
	}
	return CNUp
}
