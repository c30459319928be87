//go:build linux

package durable

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tritondatacenter/cns/db/powercut"
)

// Each call's effect survives a power cut right after it returns, on a
// file system that keeps only what was synced (db/powercut).

func readOrNil(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRenameSurvivesCut(t *testing.T) {
	d := powercut.NewDisk(t)
	if err := os.Mkdir(d.Path("other"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(d.Mnt); err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{"tmp", "other/tmp"} {
		f, err := os.Create(d.Path(from))
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("new")
		if err := Close(f); err != nil { // durably named where it is
			t.Fatal(err)
		}
		if err := Rename(d.Path(from), d.Path("f")); err != nil {
			t.Fatal(err)
		}
		d.CutAndRemount()
		if got := readOrNil(t, d.Path("f")); string(got) != "new" {
			t.Errorf("renamed from %s, after the cut f = %q", from, got)
		}
		if got := readOrNil(t, d.Path(from)); got != nil {
			t.Errorf("the old name %s is back after the cut", from)
		}
		os.Remove(d.Path("f"))
		SyncDir(d.Mnt)
	}
}

func TestMkdirAllSurvivesCut(t *testing.T) {
	d := powercut.NewDisk(t)
	dir := d.Path("var/db/cns")
	if err := MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("again: %v", err)
	}
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("x")
	if err := Close(f); err != nil {
		t.Fatal(err)
	}
	d.CutAndRemount()
	if got := readOrNil(t, filepath.Join(dir, "f")); string(got) != "x" {
		t.Errorf("after the cut: %q", got)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v %v", dir, fi, err)
	}
	if err := MkdirAll(filepath.Join(dir, "f", "g"), 0o700); err == nil {
		t.Error("MkdirAll under a file succeeded")
	}
}

func TestCloseSurvivesCut(t *testing.T) {
	d := powercut.NewDisk(t)
	f, err := os.OpenFile(d.Path("backup"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("backup "), 5000)
	f.Write(data)
	if err := Close(f); err != nil {
		t.Fatal(err)
	}
	d.CutAndRemount()
	if got := readOrNil(t, d.Path("backup")); !bytes.Equal(got, data) {
		t.Errorf("after the cut: %d bytes, want %d", len(got), len(data))
	}
}

// WriteFile, cut before each of its operations: the file is the old one
// or the new one, whole, with its mode; once WriteFile returned, the new.
func TestWriteFileAtomic(t *testing.T) {
	d := powercut.NewDisk(t)
	path := d.Path("cns.json")
	old, neu := []byte(`{"old": true}`), bytes.Repeat([]byte(`{"new": true}`), 1000)
	reset := func() {
		if err := os.WriteFile(path, old, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := d.FS.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	d.CutBeforeEach(reset, func() error { return WriteFile(path, neu, 0o600) }, func(at powercut.Op, cut bool, err error) {
		switch got := readOrNil(t, path); {
		case bytes.Equal(got, neu):
		case bytes.Equal(got, old) && cut:
		default:
			t.Fatalf("cut before %v (WriteFile: %v): the file holds %q", at, err, got)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
			t.Fatalf("cut before %v: mode %v %v, want 0640 kept", at, fi.Mode(), err)
		}
		if left, _ := filepath.Glob(d.Path(".cns.json.*")); len(left) > 0 {
			t.Fatalf("cut before %v: temporary files left: %v", at, left)
		}
	})
}
