package db

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestSerialTrust(t *testing.T) {
	d, _ := openTest(t, Options{})
	if why, err := d.SerialsUnverified(); err != nil || why != "created empty" {
		t.Fatalf("fresh db: unverified %q, %v; want \"created empty\"", why, err)
	}
	if err := d.MarkSerialsVerified(); err != nil {
		t.Fatal(err)
	}
	if why, _ := d.SerialsUnverified(); why != "" {
		t.Fatalf("after MarkSerialsVerified: %q", why)
	}
}

func TestRaiseSerial(t *testing.T) {
	d, clk := openTest(t, Options{})
	const zone = "dc.example.com"
	mustCommit(t, d, &ChangeSet{Zones: testConfig()})
	start := zoneSerial(t, d, zone)
	// A secondary holds a serial far ahead of the clock: the next version
	// passes it, with an empty journal entry.
	c := mustCommit(t, d, &ChangeSet{SerialFloors: map[string]uint32{zone: start + 5000}, Cause: "serial check"})
	if len(c.Zones) != 1 || c.Zones[0].Serial != start+5001 || c.Zones[0].Entry == nil || c.Zones[0].Entry.From != start {
		t.Fatalf("raise: %+v", c.Zones)
	}
	// A floor already passed changes nothing.
	if c, err := d.RaiseSerial(zone, start+10, "x"); err != nil || len(c.Zones) != 0 {
		t.Fatalf("floor behind: %+v, %v", c, err)
	}
	// The clock stays behind: the next change continues from the raised serial.
	clk.t = clk.t.Add(1)
	c = mustCommit(t, d, &ChangeSet{VMs: []VMChange{{UUID: vm1, Records: []Record{rec(t, zone, "a.dc.example.com. 30 IN A 192.0.2.1")}}}})
	if got := c.Zones[0].Serial; got != start+5002 {
		t.Fatalf("next serial %d, want %d", got, start+5002)
	}
	// A floor 2^31 ahead is incomparable: left alone.
	if c, err := d.RaiseSerial(zone, start+5002+1<<31, "x"); err != nil || len(c.Zones) != 0 {
		t.Fatalf("incomparable floor: %+v, %v", c, err)
	}
	// Across the wrap, in steps of less than 2^31: past 2^32-16, then
	// past 5, which comes after 2^32-15 in RFC 1982 terms (the clock,
	// 1.8e9, is after 5 too, so the serial follows the clock).
	prev := zoneSerial(t, d, zone)
	for _, c := range []struct{ floor, want uint32 }{{start + 1<<30, start + 1<<30 + 1}, {0xFFFFFFF0, 0xFFFFFFF1}, {5, uint32(clk.t.Unix())}} {
		got, err := d.RaiseSerial(zone, c.floor, "x")
		if err != nil || len(got.Zones) != 1 || got.Zones[0].Serial != c.want {
			t.Fatalf("raise from %d to pass %d: %+v, %v; want serial %d", prev, c.floor, got, err, c.want)
		}
		prev = c.want
	}
	if probs, err := d.Check(); err != nil || len(probs) > 0 {
		t.Fatalf("check: %v %v", probs, err)
	}
}

func TestRestore(t *testing.T) {
	dir := t.TempDir()
	backup := filepath.Join(dir, "backup.db")
	live := filepath.Join(dir, "cns.db")
	b, err := Open(backup, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	mustCommit(t, b, &ChangeSet{Zones: testConfig()})
	b.MarkSerialsVerified()
	b.Close()

	// The live file is held by a "running server": refused.
	running, err := Open(live, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := Restore(backup, live); !errors.Is(err, ErrLocked) {
		t.Fatalf("restore over a running server's db: %v, want ErrLocked", err)
	}
	running.Close()

	if err := Restore(backup, live); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(live)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("restored file: %v %v", fi, err)
	}
	d, err := Open(live, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	why, err := d.SerialsUnverified()
	if err != nil || why == "" {
		t.Fatalf("restored db: unverified %q, %v; want a reason", why, err)
	}
	if zoneSerial(t, d, "dc.example.com") == 0 {
		t.Fatal("restored db lacks the zone")
	}
	// A file that is not a cns db is no backup.
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte("junk"), 0o600)
	if err := Restore(junk, live); err == nil {
		t.Fatal("restore from junk succeeded")
	}
}
