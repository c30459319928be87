//go:build linux

package powercut

import (
	"os"
	"path/filepath"
	"testing"
)

// Disk is a file system mounted for a test: Dir holds the disk, Mnt is
// where it is mounted.
type Disk struct {
	Dir, Mnt string
	FS       *FS // the current mount; nil between Unmount and Mount
	t        testing.TB
}

// NewDisk mounts an empty file system in the test's temporary directory,
// or skips the test saying what this machine lacks (CI runs as root with
// /dev/fuse, and fails on the skip). The test's cleanup unmounts it.
func NewDisk(t testing.TB) *Disk {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("power-cut tests need a FUSE mount: %v", err)
	}
	base := t.TempDir()
	d := &Disk{Dir: filepath.Join(base, "disk"), Mnt: filepath.Join(base, "mnt"), t: t}
	for _, p := range []string{d.Dir, d.Mnt} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d.Mount()
	t.Cleanup(func() {
		if d.FS != nil {
			d.FS.Cut() // whatever the test left running cannot write any more
			d.FS.Unmount()
		}
	})
	return d
}

// Mount mounts the disk.
func (d *Disk) Mount() {
	d.t.Helper()
	fs, err := Mount(d.Dir, d.Mnt)
	if err != nil {
		d.t.Fatal(err)
	}
	d.FS = fs
}

// Unmount unmounts the disk: what a cut left, or everything.
func (d *Disk) Unmount() {
	d.t.Helper()
	if err := d.FS.Unmount(); err != nil {
		d.t.Fatal(err)
	}
	d.FS = nil
}

// CutAndRemount cuts the power (if a trigger has not already), unmounts
// and mounts again: the disk as the machine finds it when it comes back.
// Every process using the disk must have ended.
func (d *Disk) CutAndRemount() Lost {
	d.t.Helper()
	lost := d.FS.Cut()
	d.Unmount()
	d.Mount()
	return lost
}

// Path is name's path in the mount.
func (d *Disk) Path(name string) string { return filepath.Join(d.Mnt, name) }
