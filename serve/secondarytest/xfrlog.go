package secondarytest

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// What a secondary logs of the transfers it received.

// Xfr is one zone transfer a secondary logged as received and applied.
type Xfr struct {
	Zone   string // no trailing dot
	Serial uint32 // the serial it brought the zone to
	// Type is "IXFR" or "AXFR" as the secondary saw it (an AXFR-style
	// answer to an IXFR request is "AXFR"); NSD does not log it: "".
	Type  string
	Bytes int // as the secondary counts them
	// Took is how long the secondary says the transfer took (BIND: the
	// transfer; Knot: the whole refresh, SOA query to the zone applied;
	// NSD: receiving it).
	Took time.Duration
}

var (
	bindXfrType  = regexp.MustCompile(`transfer of '([^/]+)/IN' from \S+: got (incremental|nonincremental) response`)
	bindXfrState = regexp.MustCompile(`transfer of '([^/]+)/IN' from \S+: Transfer status: (.*)`)
	bindXfrDone  = regexp.MustCompile(`transfer of '([^/]+)/IN' from \S+: Transfer completed: \d+ messages, \d+ records, (\d+) bytes, ([\d.]+) secs .*\(serial (\d+)\)`)
	knotXfrDone  = regexp.MustCompile(`\[(\S+?)\.?\] (IXFR|AXFR), incoming, remote \S+, finished, [\d.]+ seconds, \d+ messages, (\d+) bytes`)
	knotXfrApply = regexp.MustCompile(`\[(\S+?)\.?\] refresh, remote \S+, zone updated, ([\d.]+) seconds, serial \S+ -> (\d+)`)
	nsdXfr       = regexp.MustCompile(`\bzone (\S+?)\.? received update to serial (\d+) at .* of (\d+) bytes in ([\d.e+-]+) seconds`)
)

// Transfers lists the transfers the secondary has logged so far, oldest
// first, read from its log.
func (s *Secondary) Transfers() []Xfr {
	var out []Xfr
	pending := map[string]Xfr{}   // zone → type/bytes seen, serial not yet
	status := map[string]string{} // zone → BIND's last transfer status
	for _, line := range strings.Split(s.Log(), "\n") {
		switch s.cfg.Kind {
		case BIND:
			if m := bindXfrType.FindStringSubmatch(line); m != nil {
				t := "AXFR"
				if m[2] == "incremental" {
					t = "IXFR"
				}
				pending[m[1]] = Xfr{Zone: m[1], Type: t}
			} else if m := bindXfrState.FindStringSubmatch(line); m != nil {
				status[m[1]] = strings.TrimSpace(m[2])
			} else if m := bindXfrDone.FindStringSubmatch(line); m != nil {
				// BIND says "completed" after a failed transfer too.
				x := pending[m[1]]
				delete(pending, m[1])
				if status[m[1]] != "success" {
					continue
				}
				x.Zone, x.Bytes, x.Took, x.Serial = m[1], atoi(m[2]), seconds(m[3]), uint32(atoi(m[4]))
				out = append(out, x)
			}
		case Knot:
			if m := knotXfrDone.FindStringSubmatch(line); m != nil {
				pending[m[1]] = Xfr{Zone: m[1], Type: m[2], Bytes: atoi(m[3])}
			} else if m := knotXfrApply.FindStringSubmatch(line); m != nil {
				x, ok := pending[m[1]]
				if !ok {
					continue
				}
				delete(pending, m[1])
				x.Took, x.Serial = seconds(m[2]), uint32(atoi(m[3]))
				out = append(out, x)
			}
		case NSD:
			if m := nsdXfr.FindStringSubmatch(line); m != nil {
				out = append(out, Xfr{Zone: m[1], Serial: uint32(atoi(m[2])), Bytes: atoi(m[3]), Took: seconds(m[4])})
			}
		}
	}
	return out
}

func seconds(s string) time.Duration {
	f, _ := strconv.ParseFloat(s, 64)
	return time.Duration(f * float64(time.Second))
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
