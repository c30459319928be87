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
	if testing.Short() {
		t.Skip("-short: mounts a FUSE file system")
	}
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

// CutBeforeEach runs op once to count its operations, then again with
// the power cut before each of them in turn, and once more with it cut
// right after op returned. reset puts the disk in the state op starts
// from (and makes it durable) before every run; check looks at the disk
// as it comes back from each cut, told where the cut fell (cut is false
// for the run cut after op returned) and what op returned.
func (d *Disk) CutBeforeEach(reset func(), op func() error, check func(at Op, cut bool, err error)) {
	d.t.Helper()
	reset()
	start := d.FS.Ops()
	if err := op(); err != nil {
		d.t.Fatalf("without a cut: %v", err)
	}
	n := d.FS.Ops() - start
	for k := 1; k <= n+1; k++ {
		reset()
		base := d.FS.Ops()
		d.FS.CutBefore(func(o Op) bool { return o.N == base+k })
		err := op()
		at, _, cut := d.FS.CutAt()
		d.CutAndRemount()
		check(at, cut, err)
	}
}
