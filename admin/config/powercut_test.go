//go:build linux

package config

import (
	"os"
	"testing"

	"github.com/tritondatacenter/cns/db/powercut"
)

// A change cnsadm saves to the config file survives a power cut right
// after Save returns, and a cut before any of Save's operations leaves
// the old file or the new one, never an empty one cns cannot start from
// (db/powercut keeps only what was synced).
func TestFileStoreSaveSurvivesPowerCut(t *testing.T) {
	d := powercut.NewDisk(t)
	path := d.Path("cns.json")
	old := []byte(`{"dns_domain": "old.example.com"}` + "\n")
	reset := func() {
		if err := os.WriteFile(path, old, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := d.FS.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	save := func() error {
		return FileStore{Path: path}.Save(map[string]any{"dns_domain": "new.example.com"})
	}
	reset()
	start := d.FS.Ops()
	if err := save(); err != nil {
		t.Fatal(err)
	}
	n := d.FS.Ops() - start
	for k := 1; k <= n+1; k++ {
		reset()
		base := d.FS.Ops()
		d.FS.CutBefore(func(op powercut.Op) bool { return op.N == base+k })
		err := save()
		_, _, cut := d.FS.CutAt()
		if !cut && err != nil {
			t.Fatal(err)
		}
		d.CutAndRemount()
		m, lerr := FileStore{Path: path}.Load()
		if lerr != nil {
			t.Fatalf("cut %d of %d (Save: %v): the config does not load: %v", k, n, err, lerr)
		}
		switch got := m["dns_domain"]; {
		case got == "new.example.com":
		case got == "old.example.com" && cut:
		default:
			t.Fatalf("cut %d of %d (Save returned %v): dns_domain %v", k, n, err, got)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
			t.Fatalf("cut %d: mode %v %v, want 0640 kept", k, fi.Mode(), err)
		}
	}
}
