//go:build linux

package main

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/db/powercut"
	"github.com/tritondatacenter/cns/serve/secondarytest"
)

// The files cns writes besides the db's commits, each on db/powercut (a
// file system that keeps only what was synced), with the power cut right
// after the command that writes it returned: what it said it wrote is
// there, whole.

// The db's directory, made by cns serve on its first start (here three
// levels of it), survives with the db in it.
func TestPowerCutDBDirectory(t *testing.T) {
	d := powercut.NewDisk(t)
	dir := t.TempDir()
	dbPath := d.Path("var/db/cns/cns.db")
	cfg := testConfig(t, dir, "testdata/inventory.json", func(c map[string]any) { c["db_path"] = dbPath })
	p := startCNS(t, cfg)
	p.waitCommitted(0)
	serial := soaSerial(t, p, demoZone)
	lost := d.FS.Cut()
	p.stop(syscall.SIGKILL)
	d.Unmount()
	d.Mount()
	out, stderr, code := runCNS(t, "db", "--db", dbPath, "zones")
	if code != 0 {
		t.Fatalf("after a power cut (lost %+v), the db its first start made: %s", lost, stderr)
	}
	if got := zoneSerialOffline(t, dbPath, demoZone); got != serial {
		t.Errorf("after the cut %s is at serial %d, cns served %d:\n%s", demoZone, got, serial, out)
	}
}

// `cnsadm backup` (through the API) and `cns db backup` (offline) write
// backups a power cut does not empty.
func TestPowerCutBackups(t *testing.T) {
	d := powercut.NewDisk(t)
	dir := t.TempDir()
	port, err := secondarytest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	api := fmt.Sprintf("127.0.0.1:%d", port)
	cfg := testConfig(t, dir, "testdata/inventory.json", func(c map[string]any) {
		c["api_server"] = map[string]any{"listen": api}
	})
	p := startCNS(t, cfg)
	p.waitCommitted(0)
	check := func(what, path string) {
		t.Helper()
		d.CutAndRemount()
		if out, stderr, code := runCNS(t, "db", "--db", path, "check"); code != 0 {
			t.Errorf("%s, then a power cut: %s%s", what, out, stderr)
		}
	}
	adm := d.Path("adm-backup.db")
	p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" })
	if _, stderr, code := runCNS(t, "adm", "--api", "http://"+api, "backup", adm); code != 0 {
		t.Fatalf("cnsadm backup: %s", stderr)
	}
	check("cnsadm backup", adm)
	p.stop(syscall.SIGTERM)
	offline := d.Path("db-backup.db")
	if _, stderr, code := runCNS(t, "db", "--db", filepath.Join(dir, "cns.db"), "backup", offline); code != 0 {
		t.Fatalf("cns db backup: %s", stderr)
	}
	check("cns db backup", offline)
}
