//go:build linux

package powercut

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// disk is a Disk with a test's file helpers.
type disk struct {
	*Disk
	t *testing.T
}

func mountDisk(t *testing.T) *disk { return &disk{NewDisk(t), t} }

// write creates name with data, syncing the file when syncFile.
func (d *disk) write(name string, data []byte, syncFile bool) {
	d.t.Helper()
	f, err := os.OpenFile(d.Path(name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		d.t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		d.t.Fatal(err)
	}
	if syncFile {
		if err := f.Sync(); err != nil {
			d.t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		d.t.Fatal(err)
	}
}

func (d *disk) syncDir(name string) {
	d.t.Helper()
	if err := syncDir(d.Path(name)); err != nil {
		d.t.Fatal(err)
	}
}

func syncDir(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// read returns name's bytes, or nil when it does not exist.
func (d *disk) read(name string) []byte {
	d.t.Helper()
	b, err := os.ReadFile(d.Path(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		d.t.Fatal(err)
	}
	return b
}

func TestUnsyncedWriteIsLost(t *testing.T) {
	d := mountDisk(t)
	d.write("f", []byte("synced"), true)
	d.syncDir("")
	f, err := os.OpenFile(d.Path("f"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte(" and more, never synced"))
	f.Close()
	if got := d.read("f"); string(got) != "synced and more, never synced" {
		t.Fatalf("before the cut: %q", got)
	}
	lost := d.CutAndRemount()
	if got := d.read("f"); string(got) != "synced" {
		t.Errorf("after the cut: %q, want the synced bytes", got)
	}
	if lost.Files != 1 || lost.Pages != 1 {
		t.Errorf("lost %+v, want 1 file, 1 page", lost)
	}
}

func TestSyncedFileWithoutDirSyncIsLost(t *testing.T) {
	d := mountDisk(t)
	d.write("f", []byte("data"), true)
	if err := os.Mkdir(d.Path("sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	d.write("sub/g", []byte("in a directory never named durably"), true)
	d.syncDir("sub")
	lost := d.CutAndRemount()
	if got := d.read("f"); got != nil {
		t.Errorf("a file synced but not its directory survived: %q", got)
	}
	if _, err := os.Stat(d.Path("sub")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a directory whose parent was never synced survived: %v", err)
	}
	if lost.Entries != 2 || lost.Removed != 3 {
		t.Errorf("lost %+v, want 2 entries and 3 files and directories", lost)
	}
}

func TestDirSyncMakesDurable(t *testing.T) {
	d := mountDisk(t)
	d.write("f", []byte("data"), true)
	if err := os.Mkdir(d.Path("sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	d.write("sub/g", []byte("deeper"), true)
	d.syncDir("sub")
	d.syncDir("")
	// Not synced: a file created, one whose bytes were never synced.
	d.write("h", []byte("unsynced"), false)
	d.write("sub/empty", []byte("bytes never synced"), false)
	d.syncDir("sub")
	d.CutAndRemount()
	if got := d.read("f"); string(got) != "data" {
		t.Errorf("f = %q", got)
	}
	if got := d.read("sub/g"); string(got) != "deeper" {
		t.Errorf("sub/g = %q", got)
	}
	if fi, err := os.Stat(d.Path("sub")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("sub: %v %v", fi, err)
	}
	if got := d.read("h"); got != nil {
		t.Errorf("h, created in a directory not synced since, survived: %q", got)
	}
	// Named durably, its bytes never synced: an empty file, as ext4
	// leaves one.
	if got := d.read("sub/empty"); got == nil || len(got) != 0 {
		t.Errorf("sub/empty = %q, want an empty file", got)
	}
}

func TestUnlinkWithoutDirSyncComesBack(t *testing.T) {
	d := mountDisk(t)
	d.write("f", []byte("kept"), true)
	d.syncDir("")
	if err := os.Remove(d.Path("f")); err != nil {
		t.Fatal(err)
	}
	d.CutAndRemount()
	if got := d.read("f"); string(got) != "kept" {
		t.Errorf("an unlink never synced stuck: %q", got)
	}
	os.Remove(d.Path("f"))
	d.syncDir("")
	d.CutAndRemount()
	if got := d.read("f"); got != nil {
		t.Errorf("a synced unlink came back: %q", got)
	}
}

// The write-a-copy-then-rename update, cut before every one of its
// operations in turn: the name holds the old bytes or the new, never
// neither, never a mix; and without the directory sync the new bytes
// are not promised.
func TestRenameIsAtomic(t *testing.T) {
	d := mountDisk(t)
	old := bytes.Repeat([]byte("old "), 3000)
	neu := bytes.Repeat([]byte("new!"), 2500)
	d.write("f", old, true)
	d.syncDir("")
	update := func() error {
		tmp := d.Path(".f.tmp")
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		_, err = f.Write(neu)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, d.Path("f"))
		}
		if err == nil {
			err = syncDir(d.Mnt)
		}
		return err
	}
	// A dry run counts the operations.
	start := d.FS.Ops()
	if err := update(); err != nil {
		t.Fatal(err)
	}
	n := d.FS.Ops() - start
	if n < 5 {
		t.Fatalf("the update took %d operations", n)
	}
	d.write("f", old, true)
	d.syncDir("")
	kinds := map[OpKind]bool{}
	for k := 1; k <= n+1; k++ {
		base := d.FS.Ops()
		d.FS.CutBefore(func(op Op) bool { return op.N == base+k })
		err := update()
		op, _, cut := d.FS.CutAt()
		if cut != (k <= n) {
			t.Fatalf("cut %d: cut=%v", k, cut)
		}
		if cut {
			kinds[op.Kind] = true
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("cut before %v: the update says %v, want EIO", op, err)
			}
		}
		d.Unmount()
		d.Mount()
		got := d.read("f")
		switch {
		case bytes.Equal(got, old):
			if !cut {
				t.Fatalf("the update finished, f holds the old bytes")
			}
		case bytes.Equal(got, neu):
			if cut && op.Kind != OpFsyncDir && k < n {
				// Only the last step (the directory sync) can be cut
				// after the new bytes are promised.
				t.Fatalf("cut before %v: f already new", op)
			}
		default:
			t.Fatalf("cut before %v: f holds %d bytes, neither old nor new", op, len(got))
		}
		if got := d.read(".f.tmp"); got != nil {
			t.Fatalf("cut before %v: the temporary file is left", op)
		}
		d.write("f", old, true)
		d.syncDir("")
	}
	for _, k := range []OpKind{OpCreate, OpWrite, OpFsync, OpRename, OpFsyncDir} {
		if !kinds[k] {
			t.Errorf("no cut before a %s (saw %v)", k, kinds)
		}
	}
}

// After a cut nothing works until the file system is mounted again.
func TestCutStopsEverything(t *testing.T) {
	d := mountDisk(t)
	d.write("f", []byte("x"), true)
	f, err := os.OpenFile(d.Path("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d.FS.CutBefore(func(op Op) bool { return op.Kind == OpFsync })
	if _, err := f.Write([]byte("y")); err != nil {
		t.Fatalf("write before the cut: %v", err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the fsync the power was cut before: %v, want EIO", err)
	}
	select {
	case <-d.FS.CutDone():
	default:
		t.Fatal("CutDone not closed")
	}
	if op, _, ok := d.FS.CutAt(); !ok || op.Kind != OpFsync || op.Path != "f" {
		t.Errorf("cut at %v %v", op, ok)
	}
	if _, err := f.Write([]byte("z")); !errors.Is(err, syscall.EIO) {
		t.Errorf("write after the cut: %v, want EIO", err)
	}
	if _, err := os.Stat(d.Path("f")); !errors.Is(err, syscall.EIO) {
		t.Errorf("stat after the cut: %v, want EIO", err)
	}
}

// A clean unmount keeps everything, synced or not, and a mount reads
// back what an unmount wrote, hard links included.
func TestCleanUnmountKeepsAll(t *testing.T) {
	d := mountDisk(t)
	if err := os.MkdirAll(d.Path("a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	d.write("a/b/f", []byte("never synced"), false)
	if err := os.Link(d.Path("a/b/f"), d.Path("g")); err != nil {
		t.Fatal(err)
	}
	d.Unmount()
	if got, err := os.ReadFile(filepath.Join(d.Dir, "a/b/f")); err != nil || string(got) != "never synced" {
		t.Fatalf("on disk after a clean unmount: %q %v", got, err)
	}
	d.Mount()
	if err := os.WriteFile(d.Path("g"), []byte("one file, two names"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := d.read("a/b/f"); string(got) != "one file, two names" {
		t.Errorf("hard link lost across a mount: %q", got)
	}
	if entries, _ := os.ReadDir(d.Mnt); len(entries) != 2 {
		t.Errorf("root lists %v, want a and g", entries)
	}
}

// Random writes and truncations of one file, read back through the
// mount after each, against a plain byte slice; then a cut must leave
// exactly what the last fsync saw.
func TestRandomWritesAgainstModel(t *testing.T) {
	d := mountDisk(t)
	rng := rand.New(rand.NewPCG(5, 6))
	d.write("f", nil, true)
	d.syncDir("")
	f, err := os.OpenFile(d.Path("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var cur, synced []byte
	for i := range 400 {
		switch r := rng.IntN(10); {
		case r < 6:
			off := rng.IntN(5 * pageSize)
			p := make([]byte, 1+rng.IntN(3*pageSize))
			for j := range p {
				p[j] = byte(rng.Uint32())
			}
			if _, err := f.WriteAt(p, int64(off)); err != nil {
				t.Fatal(err)
			}
			if end := off + len(p); end > len(cur) {
				cur = append(cur, make([]byte, end-len(cur))...)
			}
			copy(cur[off:], p)
		case r < 8:
			size := rng.IntN(6 * pageSize)
			if err := f.Truncate(int64(size)); err != nil {
				t.Fatal(err)
			}
			if size < len(cur) {
				cur = cur[:size]
			} else {
				cur = append(cur, make([]byte, size-len(cur))...)
			}
		default:
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			synced = slices.Clone(cur)
		}
		if got := d.read("f"); !bytes.Equal(got, cur) {
			t.Fatalf("step %d: the file reads %d bytes unlike the %d written", i, len(got), len(cur))
		}
	}
	f.Close()
	d.CutAndRemount()
	if got := d.read("f"); !bytes.Equal(got, synced) {
		t.Fatalf("after the cut: %d bytes, not the %d last synced", len(got), len(synced))
	}
}

// O_SYNC writes are durable when write returns.
func TestOSyncWrite(t *testing.T) {
	d := mountDisk(t)
	d.write("f", nil, true)
	d.syncDir("")
	f, err := os.OpenFile(d.Path("f"), os.O_WRONLY|os.O_SYNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("at once"))
	f.Close()
	d.CutAndRemount()
	if got := d.read("f"); string(got) != "at once" {
		t.Errorf("O_SYNC write lost: %q", got)
	}
}
