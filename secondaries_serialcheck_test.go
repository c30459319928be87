package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/serve/secondarytest"
)

// Serial continuity with real secondaries (issue 20): serials driven
// ahead of the clock by many commits a second, then the db lost, or an
// old backup restored with `cns db restore`, and cns restarted. Without
// the serial check every secondary would ignore cns until the clock
// caught up; with it, cns moves past what they hold before announcing
// anything, they follow at once, and so does the next change.
func TestSerialContinuitySecondaries(t *testing.T) {
	kinds := interopKinds(t)
	for _, tc := range []struct {
		name string
		// lose loses the db of the stopped cns, given a backup taken
		// before the serials ran ahead.
		lose func(t *testing.T, dbPath, backup string)
	}{
		{"db deleted", func(t *testing.T, dbPath, _ string) {
			if err := os.Remove(dbPath); err != nil {
				t.Fatal(err)
			}
		}},
		{"old backup restored", func(t *testing.T, dbPath, backup string) {
			if _, stderr, code := runCNS(t, "db", "--db", dbPath, "restore", backup); code != 0 {
				t.Fatalf("cns db restore: exit %d: %s", code, stderr)
			}
			if out, _, _ := runCNS(t, "db", "--db", dbPath, "info"); !strings.Contains(out, "serials: unverified (restored from ") {
				t.Fatalf("cns db info after a restore does not say the serials are unverified:\n%s", out)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testSerialContinuity(t, kinds, tc.lose)
		})
	}
}

func testSerialContinuity(t *testing.T, kinds []secondarytest.Kind, lose func(t *testing.T, dbPath, backup string)) {
	inv := interopInventory()
	r := newInteropRig(t, kinds, inv, false, func(c map[string]any) { c["batch_window_ms"] = 0 })
	r.converge("initial transfer")
	// A db created empty vouches for its serials once every secondary
	// has answered for its zones; a restart before that moves them past
	// the secondaries' (which this test does on purpose below).
	r.cns.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "every secondary answered: serials verified" })
	dbPath := filepath.Join(r.dir, "cns.db")
	backup := filepath.Join(r.dir, "backup.db")
	r.restartCNS(func() {
		if _, stderr, code := runCNS(t, "db", "--db", dbPath, "backup", backup); code != 0 {
			t.Fatalf("cns db backup: exit %d: %s", code, stderr)
		}
	})
	r.converge("restart after the backup")

	// Many commits a second: the serials run ahead of the clock.
	owner := inv.Users[0].UUID
	for i := range 40 {
		r.apply(func(inv *dc.Inventory) {
			inv.VMs = append(inv.VMs, interopVM(inv, i, owner, fmt.Sprintf("burst%d", i), fmt.Sprintf("10.0.1.%d", 130+i), ""))
		})
	}
	r.converge("serials ahead of the clock")
	ahead := r.serials()
	now := uint32(time.Now().Unix())
	maxAhead := int32(0)
	for z, s := range ahead {
		t.Logf("%s: serial %d, %d s ahead of the clock", z, s, int32(s-now))
		maxAhead = max(maxAhead, int32(s-now))
	}
	if maxAhead < 5 {
		t.Fatalf("the serials are only %d s ahead of the clock; the test proves nothing", maxAhead)
	}

	r.restartCNS(func() { lose(t, dbPath, backup) })
	r.cns.waitCommitted(0)
	// Without any further change, every zone moves past what the
	// secondaries hold, and they follow.
	deadline := time.Now().Add(interopPropagation)
	for _, z := range r.zones {
		for !secondarytest.SerialGE(r.serial(z), ahead[z]+1) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: cns serves serial %d, the secondaries hold %d; log:\n%s", z, r.serial(z), ahead[z], tailLines(r.cns.log(), 30))
			}
			time.Sleep(20 * time.Millisecond) // polling cns's served serial
		}
	}
	l := r.cns.waitLog(5*time.Second, func(l logLine) bool {
		return l.str("msg") == "a secondary holds a serial at or past the db's; continuing above it"
	})
	t.Logf("cns logged: zone %s peer %s peer_serial %.0f serial %.0f", l.str("zone"), l.str("peer"), l["peer_serial"], l["serial"])
	r.converge("after the restart")
	r.step("the next change", false, func(inv *dc.Inventory) {
		inv.VMs = append(inv.VMs, interopVM(inv, 99, owner, "after", "10.0.1.250", ""))
	})
}

// restartCNS stops cns, runs between while it is stopped, and starts it
// again on the same config, with env (KEY=value) added to its environment.
func (r *interopRig) restartCNS(between func(), env ...string) {
	r.t.Helper()
	r.cns.stop(syscall.SIGTERM)
	between()
	r.cns = startCNS(r.t, r.cfgPath, env...)
}

// The system clock stepped back an hour and forward a day while cns was
// stopped (CNS_TEST_CLOCK_OFFSET shifts the clock the binary reads; steps
// while it runs do not reach it at all: db.Now): serials never repeat or
// go back, every change reaches every secondary, and the db stays sound.
func TestClockStepsSecondaries(t *testing.T) {
	kinds := interopKinds(t)
	inv := interopInventory()
	r := newInteropRig(t, kinds, inv, false, nil)
	r.converge("initial transfer")
	owner := inv.Users[0].UUID
	last := r.serials()
	dbPath := filepath.Join(r.dir, "cns.db")
	for i, offset := range []string{"-1h", "24h", "0s", "-1h"} {
		r.restartCNS(func() {}, "CNS_TEST_CLOCK_OFFSET="+offset)
		r.cns.waitCommitted(0) // the first listing
		r.step("clock "+offset, false, func(inv *dc.Inventory) {
			inv.VMs = append(inv.VMs, interopVM(inv, 200+i, owner, fmt.Sprintf("clock%d", i), fmt.Sprintf("10.0.1.%d", 200+i), ""))
		})
		now := r.serials()
		for z, s := range now {
			if s != last[z] && !secondarytest.SerialGE(s, last[z]+1) {
				t.Fatalf("clock %s: %s serial %d after %d", offset, z, s, last[z])
			}
		}
		t.Logf("clock %s: serials %v", offset, now)
		last = now
	}
	r.cns.stop(syscall.SIGTERM)
	if out, stderr, code := runCNS(t, "db", "--db", dbPath, "check"); code != 0 {
		t.Fatalf("cns db check: exit %d: %s%s", code, out, stderr)
	}
}
