//go:build linux

package cnsadm

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
	d.CutBeforeEach(reset, save, func(at powercut.Op, cut bool, err error) {
		m, lerr := FileStore{Path: path}.Load()
		if lerr != nil {
			t.Fatalf("cut before %v (Save: %v): the config does not load: %v", at, err, lerr)
		}
		switch got := m.Value("dns_domain"); {
		case got == "new.example.com":
		case got == "old.example.com" && cut:
		default:
			t.Fatalf("cut before %v (Save returned %v): dns_domain %v", at, err, got)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
			t.Fatalf("cut before %v: mode %v %v, want 0640 kept", at, fi.Mode(), err)
		}
	})
}
