package db

import (
	"fmt"
	"testing"
	"time"
)

// Ensure serials never repeat or go back, and journal age limits neither
// drop everything nor keep everything, with the clock stepped back an hour
// and forward a day (the injected clock is what db.Now or a stored time
// from another run would give).
func TestClockSteps(t *testing.T) {
	const zone = "dc.example.com"
	d, clk := openTest(t, Options{Journal: &JournalLimits{MaxEntries: 1000, MaxAge: 2 * time.Hour}})
	mustCommit(t, d, &ChangeSet{Zones: testConfig()})
	last := zoneSerial(t, d, zone)
	n := 0
	change := func() uint32 {
		t.Helper()
		n++
		c := mustCommit(t, d, &ChangeSet{VMs: []VMChange{{UUID: vm1, Records: []Record{rec(t, zone, fmt.Sprintf("a.dc.example.com. 30 IN A 192.0.2.%d", n%250+1))}}}})
		s := c.Zones[0].Serial
		if !SerialLess(last, s) {
			t.Fatalf("commit %d at %v: serial %d after %d", n, clk.t, s, last)
		}
		last = s
		return s
	}
	entries := func() int {
		zi, _, _ := d.Zone(zone)
		return zi.JournalEntries
	}
	// An hour of commits, one a minute.
	for range 60 {
		clk.t = clk.t.Add(time.Minute)
		change()
	}
	if got := entries(); got != 60 {
		t.Fatalf("journal %d entries, want 60", got)
	}
	// Back an hour: serials go on from the last; nothing is trimmed.
	clk.t = clk.t.Add(-time.Hour)
	for range 10 {
		clk.t = clk.t.Add(time.Second)
		change()
	}
	if got := entries(); got != 70 {
		t.Fatalf("after the step back: journal %d entries, want 70 (none trimmed)", got)
	}
	// Forward a day: the serial jumps with the clock, the journal keeps
	// at least the newest entry, so an IXFR from the last serial works.
	before := last
	clk.t = clk.t.Add(24 * time.Hour)
	s := change()
	if s != uint32(clk.t.Unix()) {
		t.Fatalf("serial %d a day later, want the clock's %d", s, clk.t.Unix())
	}
	if got := entries(); got != 1 {
		t.Fatalf("a day later: journal %d entries, want 1 (the newest; the rest are over MaxAge)", got)
	}
	if es, ok, err := d.Journal(zone, before); err != nil || !ok || len(es) != 1 {
		t.Fatalf("journal from %d: %d entries, %v, %v", before, len(es), ok, err)
	}
	// And back again (the step corrected): serials go on from there.
	clk.t = clk.t.Add(-24 * time.Hour)
	for range 5 {
		clk.t = clk.t.Add(time.Second)
		change()
	}
	if probs, err := d.Check(); err != nil || len(probs) > 0 {
		t.Fatalf("check: %v %v", probs, err)
	}
}

// Ensure cns's clock runs with the wall clock (it is the wall clock read
// at start plus the monotonic time since).
func TestNow(t *testing.T) {
	a := Now()
	if d := time.Since(a); d < -time.Second || d > time.Second {
		t.Fatalf("Now is %v off the wall clock", d)
	}
	time.Sleep(2 * time.Millisecond) // measuring elapsed time
	if b := Now(); !b.After(a) {
		t.Fatalf("Now went from %v to %v", a, b)
	}
}
