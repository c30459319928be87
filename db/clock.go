package db

import (
	"os"
	"time"
)

// The clock of every time cns stores (serials, journal entry times,
// hysteresis windows): the wall clock read once when the process starts,
// advanced by the monotonic clock from then on. A step of the system
// clock while cns runs (an hour back, a day forward) therefore moves
// none of them; a clock stepped while cns is stopped, or corrected by a
// step while it runs, is picked up at the next start. Times read back
// from the db are wall-clock times from another run and are treated
// defensively where they are read (serials never go back: max(last+1,
// now); journal trimming always keeps the newest entry; hysteresis
// clamps times in the future).
var (
	processStart = time.Now()
	processWall  = processStart.Round(0).Add(testClockOffset())
)

// Now returns the current time on cns's clock.
func Now() time.Time { return processWall.Add(time.Since(processStart)) }

// testClockOffset is CNS_TEST_CLOCK_OFFSET (a Go duration, "-1h",
// "24h"): how far the whole-program tests pretend the system clock is
// off. Not documented for operators.
func testClockOffset() time.Duration {
	d, err := time.ParseDuration(os.Getenv("CNS_TEST_CLOCK_OFFSET"))
	if err != nil {
		return 0
	}
	return d
}
