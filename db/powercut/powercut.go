//go:build linux

// Package powercut is a file system for power-loss tests: a FUSE file
// system over a real directory that keeps every change in memory until
// it is synced, and on a power cut drops whatever was not.
//
// What survives a cut is what a careful program can count on from a
// POSIX file system (the conservative reading LazyFS and ALICE model, and
// what ext4 without dirsync gives at worst):
//
//   - a file's bytes and size survive once the file is fsynced or
//     fdatasynced (or written through a descriptor opened O_SYNC or
//     O_DSYNC);
//   - a name (a create, a rename, an unlink, a link, a mkdir, an rmdir)
//     survives once the directory holding it is fsynced, and not before,
//     whether or not the file it names was synced: a new file synced in
//     a directory never synced is lost whole;
//   - a directory fsync makes every change to its entries durable at
//     once, so a rename is atomic: after a cut the name is the old file
//     or the new one, never neither and never a mix.
//
// The directory holds the disk: while mounted, each file's synced bytes
// in a store directory inside it (.powercut, by inode), the synced names
// in memory; on Unmount, the synced tree as ordinary files and
// directories (after a Cut) or the whole tree (a clean unmount syncs it
// first). Mount reads such a directory back, so a test mounts, runs,
// cuts, unmounts, inspects the directory with any tool, and mounts again.
//
// It is for tests: one lock serialises every operation; mode bits are
// kept, ownership and times are the caller's and not modelled; no
// symlinks, devices, xattrs or locks held in the file system (flock
// and fcntl locks are the kernel's own, as on a local file system).
//
// A process must not map (mmap) a file of a mount it serves itself, as
// bbolt does: a page fault waits for the file system, whose goroutines
// may wait for a garbage collection that waits for the faulting thread.
// Run what maps files (cns, a test's store) in a process of its own, or
// read the disk once it is unmounted.
package powercut

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// storeDir is where the synced bytes of files live while mounted.
const storeDir = ".powercut"

// Available says why this machine cannot mount the file system (no
// /dev/fuse, not root), or nil.
func Available() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("no FUSE device (/dev/fuse): %w", err)
	}
	if os.Geteuid() != 0 {
		return errors.New("mounting a FUSE file system without fusermount needs root")
	}
	return nil
}

// OpKind names a changing operation, the points a power cut falls
// between.
type OpKind string

// The operations a cut can come before.
const (
	OpWrite    OpKind = "write"
	OpTruncate OpKind = "truncate"
	OpChmod    OpKind = "chmod"
	OpCreate   OpKind = "create"
	OpMkdir    OpKind = "mkdir"
	OpLink     OpKind = "link"
	OpUnlink   OpKind = "unlink"
	OpRmdir    OpKind = "rmdir"
	OpRename   OpKind = "rename"
	OpFsync    OpKind = "fsync"
	OpFsyncDir OpKind = "fsyncdir"
)

// Op is one changing operation, as the trigger of a cut sees it.
type Op struct {
	N    int    // 1 for the first changing operation of the mount
	Kind OpKind // what it does
	Path string // what it acts on, from the mount's root ("a/b"; "" is the root)
	To   string // a rename's new path
}

func (o Op) String() string {
	if o.Kind == "" {
		return "no operation (after it returned)"
	}
	s := fmt.Sprintf("#%d %s /%s", o.N, o.Kind, o.Path)
	if o.To != "" {
		s += " → /" + o.To
	}
	return s
}

// Lost is what a cut dropped.
type Lost struct {
	Pages   int // unsynced 4 KiB pages of file data
	Files   int // files whose size or bytes were unsynced
	Entries int // directory entries whose change was unsynced
	Removed int // files and directories that no synced name reaches
}

// FS is a mounted power-cut file system.
type FS struct {
	dir, mnt string
	server   *fuse.Server

	mu      sync.Mutex
	nodes   map[uint64]*node
	nextID  uint64
	handles map[uint64]*handle
	nextFh  uint64
	ops     int
	trigger func(Op) bool
	cut     *Op // the operation the power was cut before (N 0: Cut)
	lost    Lost
	cutc    chan struct{}
	gone    bool // unmounted
}

// node is a file or a directory.
type node struct {
	id      uint64
	dir     bool
	mode    uint32 // permission bits as they are
	durMode uint32 // as a cut leaves them
	parent  *node  // where it was last named, for Op paths
	name    string

	links   int // names in directories as they are
	dlinks  int // names in directories as a cut leaves them
	lookups uint64
	opens   int

	data *content // a file's bytes

	entries map[string]*node // a directory's entries as they are
	durable map[string]*node // as a cut leaves them
}

// handle is an open file or directory.
type handle struct {
	n     *node
	sync  bool            // opened O_SYNC or O_DSYNC: every write is synced
	names []fuse.DirEntry // a directory's listing when opened
}

// Mount mounts the tree in dir at mnt. dir must hold only regular files
// and directories, as Unmount leaves them.
func Mount(dir, mnt string) (*FS, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	f := &FS{dir: dir, mnt: mnt, nodes: map[uint64]*node{}, handles: map[uint64]*handle{}, cutc: make(chan struct{})}
	if err := f.load(); err != nil {
		return nil, fmt.Errorf("powercut: %s: %w", dir, err)
	}
	raw := &rawFS{RawFileSystem: fuse.NewDefaultRawFileSystem(), f: f}
	srv, err := fuse.NewServer(raw, mnt, &fuse.MountOptions{
		FsName: "powercut:" + dir, Name: "powercut",
		DirectMountStrict: true, // no fusermount here: root mounts it itself
		DisableXAttrs:     true,
		// Every listing and lookup comes to the file system, which
		// keeps the numbering simple: a lookup is counted once.
		DisableReadDirPlus: true,
		MaxWrite:           1 << 20,
	})
	if err != nil {
		f.unload(false)
		return nil, fmt.Errorf("powercut: mount %s: %w", mnt, err)
	}
	f.server = srv
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		syscall.Unmount(mnt, syscall.MNT_DETACH)
		srv.Wait()
		f.unload(false)
		return nil, fmt.Errorf("powercut: mount %s: %w", mnt, err)
	}
	return f, nil
}

// CutBefore arms a cut: before each changing operation, trigger is asked
// (with the file system's lock held: it must not use the file system),
// and when it says so the power goes before the operation is done.
func (f *FS) CutBefore(trigger func(Op) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trigger = trigger
}

// Cut cuts the power now: every operation from here on fails with EIO,
// and what was not synced is gone. It returns what was lost.
func (f *FS) Cut() Lost {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cutLocked(Op{Kind: "cut", N: f.ops})
	return f.lost
}

// CutDone is closed when the power is cut.
func (f *FS) CutDone() <-chan struct{} { return f.cutc }

// CutAt returns the operation the power was cut before, and what the cut
// dropped; ok is false while the power is on.
func (f *FS) CutAt() (op Op, lost Lost, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut == nil {
		return Op{}, Lost{}, false
	}
	return *f.cut, f.lost, true
}

// Ops returns how many changing operations the mount has seen.
func (f *FS) Ops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

// Sync makes everything durable, as sync(2) does.
func (f *FS) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut != nil {
		return syscall.EIO
	}
	return f.syncAll()
}

// Unmount unmounts the file system and leaves in its directory the tree
// a cut left, or, without a cut, the whole tree (a clean unmount
// writes everything). Every process using it must have ended or closed
// its files: the unmount is lazy, and waits for them.
func (f *FS) Unmount() error {
	err := syscall.Unmount(f.mnt, syscall.MNT_DETACH)
	if err != nil {
		return fmt.Errorf("powercut: unmount %s: %w", f.mnt, err)
	}
	f.server.Wait()
	f.mu.Lock()
	clean := f.cut == nil
	f.mu.Unlock()
	return f.unload(clean)
}

// before is called before every changing operation, with f.mu held: it
// counts it and cuts the power when the trigger says so.
func (f *FS) before(kind OpKind, n *node, to string) fuse.Status {
	if f.cut != nil {
		return fuse.EIO
	}
	f.ops++
	if f.trigger != nil {
		op := Op{N: f.ops, Kind: kind, Path: n.path(), To: to}
		if f.trigger(op) {
			f.cutLocked(op)
			return fuse.EIO
		}
	}
	return fuse.OK
}

// cutLocked drops everything unsynced: every file back to its synced
// bytes, every directory back to its synced entries, and what no synced
// name reaches is deleted.
func (f *FS) cutLocked(op Op) {
	if f.cut != nil {
		return
	}
	f.cut = &op
	for _, n := range f.nodes {
		if n.data != nil {
			if n.data.size != n.data.durSize || len(n.data.dirty) > 0 || n.data.hidden != n.data.durSize {
				f.lost.Files++
			}
			f.lost.Pages += n.data.lose()
		}
		if n.dir {
			for name, c := range n.entries {
				if n.durable[name] != c {
					f.lost.Entries++
				}
			}
			for name, c := range n.durable {
				if n.entries[name] != c {
					f.lost.Entries++
				}
			}
			n.entries = cloneEntries(n.durable)
		}
		n.mode = n.durMode
		n.links, n.lookups, n.opens = 0, 0, 0
	}
	clear(f.handles)
	for _, n := range f.nodes {
		for name, c := range n.entries {
			c.links++
			c.parent, c.name = n, name
		}
		n.dlinks = n.links
	}
	// What the root no longer reaches was never durably named.
	reached := map[*node]bool{}
	var walk func(*node)
	walk = func(n *node) {
		reached[n] = true
		for _, c := range n.entries {
			if !reached[c] {
				walk(c)
			}
		}
	}
	walk(f.nodes[fuse.FUSE_ROOT_ID])
	for id, n := range f.nodes {
		if !reached[n] {
			f.lost.Removed++
			f.dropHome(n)
			delete(f.nodes, id)
		}
	}
	close(f.cutc)
}

// syncAll makes every file's bytes and every directory's entries durable.
func (f *FS) syncAll() error {
	for _, n := range f.nodes {
		if n.data != nil {
			if err := n.data.sync(); err != nil {
				return err
			}
		}
		n.durMode = n.mode
		if n.dir {
			f.syncDir(n)
		}
	}
	return nil
}

// syncDir makes d's entries durable.
func (f *FS) syncDir(d *node) {
	old := d.durable
	d.durable = cloneEntries(d.entries)
	for _, c := range d.durable {
		c.dlinks++
	}
	for _, c := range old {
		c.dlinks--
		f.release(c)
	}
}

// release forgets n once nothing names it, durably or not, and nothing
// has it open or looked up.
func (f *FS) release(n *node) {
	if n.links > 0 || n.dlinks > 0 || n.lookups > 0 || n.opens > 0 || n.id == fuse.FUSE_ROOT_ID {
		return
	}
	if _, ok := f.nodes[n.id]; !ok {
		return
	}
	delete(f.nodes, n.id)
	f.dropHome(n)
	for _, c := range n.durable {
		c.dlinks--
		f.release(c)
	}
	n.durable = nil
}

func (f *FS) dropHome(n *node) {
	if n.data != nil {
		n.data.home.Close()
		os.Remove(f.homePath(n.id))
	}
}

func (f *FS) homePath(id uint64) string {
	return filepath.Join(f.dir, storeDir, strconv.FormatUint(id, 10))
}

// newNode makes a node; a file gets its (empty) home.
func (f *FS) newNode(dir bool, mode uint32) (*node, error) {
	f.nextID++
	n := &node{id: f.nextID, dir: dir, mode: mode & 0o7777}
	if dir {
		n.entries, n.durable = map[string]*node{}, map[string]*node{}
	} else {
		home, err := os.OpenFile(f.homePath(n.id), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, err
		}
		n.data = newContent(home, 0)
	}
	f.nodes[n.id] = n
	return n, nil
}

// path is where n was last named, from the root.
func (n *node) path() string {
	if n.parent == nil {
		return n.name
	}
	if p := n.parent.path(); p != "" {
		return p + "/" + n.name
	}
	return n.name
}

// cloneEntries copies a directory's entries (never nil: entries are
// added to it).
func cloneEntries(m map[string]*node) map[string]*node {
	out := make(map[string]*node, len(m))
	maps.Copy(out, m)
	return out
}

// load reads the tree in f.dir into nodes, moving every file into the
// store (the tree's names then live in memory until unload).
func (f *FS) load() error {
	store := filepath.Join(f.dir, storeDir)
	if _, err := os.Stat(store); err == nil {
		return fmt.Errorf("%s exists: the directory is mounted, or a test ended without unmounting it", store)
	}
	if err := os.Mkdir(store, 0o700); err != nil {
		return err
	}
	f.nextID = fuse.FUSE_ROOT_ID
	root := &node{id: fuse.FUSE_ROOT_ID, dir: true, mode: 0o755, entries: map[string]*node{}}
	if fi, err := os.Stat(f.dir); err == nil {
		root.mode = uint32(fi.Mode().Perm())
	}
	root.durMode = root.mode
	f.nodes[root.id] = root
	byIno := map[uint64]*node{} // hard links: one node
	var dirs []string
	var walk func(d *node, path string) error
	walk = func(d *node, path string) error {
		ents, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := filepath.Join(path, e.Name())
			if p == store {
				continue
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			st, _ := fi.Sys().(*syscall.Stat_t)
			var c *node
			switch {
			case fi.IsDir():
				c = &node{id: f.nextID + 1, dir: true, mode: uint32(fi.Mode().Perm()), entries: map[string]*node{}}
				f.nextID++
				f.nodes[c.id] = c
				if err := walk(c, p); err != nil {
					return err
				}
				dirs = append(dirs, p)
			case fi.Mode().IsRegular():
				if c = byIno[st.Ino]; c != nil {
					if err := os.Remove(p); err != nil {
						return err
					}
					break
				}
				f.nextID++
				c = &node{id: f.nextID, mode: uint32(fi.Mode().Perm())}
				if err := os.Rename(p, f.homePath(c.id)); err != nil {
					return err
				}
				home, err := os.OpenFile(f.homePath(c.id), os.O_RDWR, 0)
				if err != nil {
					return err
				}
				c.data = newContent(home, fi.Size())
				f.nodes[c.id] = c
				byIno[st.Ino] = c
			default:
				return fmt.Errorf("%s: %v files are not kept", p, fi.Mode().Type())
			}
			c.durMode = c.mode
			c.parent, c.name = d, e.Name()
			d.entries[e.Name()] = c
			c.links++
		}
		d.durable = cloneEntries(d.entries)
		return nil
	}
	if err := walk(root, f.dir); err != nil {
		return err
	}
	for _, n := range f.nodes {
		n.dlinks = n.links
	}
	// The names are in memory now; dirs lists each directory after those
	// inside it.
	for _, d := range dirs {
		if err := os.Remove(d); err != nil {
			return err
		}
	}
	return nil
}

// unload writes the durable tree (after syncing everything, when clean)
// back as ordinary files and directories, and removes the store.
func (f *FS) unload(clean bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone {
		return nil
	}
	f.gone = true
	if clean {
		if err := f.syncAll(); err != nil {
			return err
		}
	}
	now := time.Now()
	var write func(d *node, path string) error
	write = func(d *node, path string) error {
		for _, name := range slices.Sorted(maps.Keys(d.durable)) {
			c, p := d.durable[name], filepath.Join(path, name)
			if c.dir {
				if err := os.Mkdir(p, fs.FileMode(c.durMode)); err != nil {
					return err
				}
				if err := write(c, p); err != nil {
					return err
				}
				continue
			}
			if err := os.Link(f.homePath(c.id), p); err != nil {
				return err
			}
			if err := os.Chmod(p, fs.FileMode(c.durMode)); err != nil {
				return err
			}
			os.Chtimes(p, now, now)
		}
		return nil
	}
	err := write(f.nodes[fuse.FUSE_ROOT_ID], f.dir)
	for _, n := range f.nodes {
		if n.data != nil {
			n.data.home.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("powercut: write back %s: %w", f.dir, err)
	}
	return os.RemoveAll(filepath.Join(f.dir, storeDir))
}
