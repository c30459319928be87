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
// instance got the heartbeats) does not count as down at once, and a
// last_boot in the future does not count as a recent boot.
//
//	down = (status != running && not heard from for 1 h) || booted < 2 min ago
//	an unsetup server is down.
//
// "Heard from" is last_heartbeat when CNAPI gives one. When it gives null
// (the field is deprecated), the status is the signal, timed by the
// consumer as the reference timed the heartbeat: NotRunningSince, when
// the feed first saw the CN not running. A CN that died before CNAPI's
// restart is therefore down once it has been seen not running for the
// rule's hour; with neither, the state is unknown.
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
	heard, ok := lastHeard(s)
	if !ok {
		return CNUnknown
	}
	if now.Sub(heard) > HeartbeatStale {
		return CNDown
	}
	return CNUp
}

// lastHeard is the last time the CN is known to have been alive: its
// last_heartbeat, else when it was first seen not running.
func lastHeard(s *Server) (time.Time, bool) {
	if s.LastHeartbeat != nil {
		if hb, err := time.Parse(time.RFC3339Nano, *s.LastHeartbeat); err == nil {
			return hb, true
		}
	}
	return s.NotRunningSince, !s.NotRunningSince.IsZero()
}
