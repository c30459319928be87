//go:build linux

package powercut

import (
	"maps"
	"slices"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// rawFS answers the kernel's FUSE requests from FS. Nodes are numbered
// by their id (the root is FUSE_ROOT_ID), and every answer is valid for
// no time: the kernel asks again, so what it shows is what FS holds.
type rawFS struct {
	fuse.RawFileSystem
	f *FS
}

func (r *rawFS) String() string { return "powercut" }

// renameExchange is RENAME_EXCHANGE (linux/fs.h), which nothing tested
// here uses; RENAME_NOREPLACE is honoured.
const (
	renameNoReplace = 1
	renameExchange  = 2
)

// lookup returns the node numbered id, or nil.
func (f *FS) lookup(id uint64) *node { return f.nodes[id] }

// dirNode returns the directory numbered id.
func (f *FS) dirNode(id uint64) (*node, fuse.Status) {
	if f.cut != nil {
		return nil, fuse.EIO
	}
	d := f.nodes[id]
	if d == nil {
		return nil, fuse.ENOENT
	}
	if !d.dir {
		return nil, fuse.ENOTDIR
	}
	return d, fuse.OK
}

func (n *node) attr(a *fuse.Attr) {
	a.Ino = n.id
	a.Blksize = pageSize
	if n.dir {
		a.Mode = syscall.S_IFDIR | n.mode
		a.Nlink = 2
		for _, c := range n.entries {
			if c.dir {
				a.Nlink++
			}
		}
		a.Size = pageSize
	} else {
		a.Mode = syscall.S_IFREG | n.mode
		a.Nlink = uint32(n.links)
		a.Size = uint64(n.data.size)
		a.Blocks = (a.Size + 511) / 512
	}
	now := time.Now()
	a.SetTimes(&now, &now, &now)
}

// entry answers a lookup of n, which the kernel now holds once more.
func (n *node) entry(out *fuse.EntryOut) {
	n.lookups++
	out.NodeId = n.id
	n.attr(&out.Attr)
}

func (r *rawFS) Lookup(_ <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	d, st := f.dirNode(h.NodeId)
	if !st.Ok() {
		return st
	}
	c := d.entries[name]
	if c == nil {
		return fuse.ENOENT
	}
	c.entry(out)
	return fuse.OK
}

func (r *rawFS) Forget(id, nlookup uint64) {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.lookup(id); n != nil && f.cut == nil {
		n.lookups -= min(n.lookups, nlookup)
		f.release(n)
	}
}

func (r *rawFS) GetAttr(_ <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut != nil {
		return fuse.EIO
	}
	n := f.lookup(in.NodeId)
	if n == nil {
		return fuse.ENOENT
	}
	n.attr(&out.Attr)
	return fuse.OK
}

func (r *rawFS) SetAttr(_ <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut != nil {
		return fuse.EIO
	}
	n := f.lookup(in.NodeId)
	if n == nil {
		return fuse.ENOENT
	}
	if mode, ok := in.GetMode(); ok {
		if st := f.before(OpChmod, n, ""); !st.Ok() {
			return st
		}
		n.mode = mode & 0o7777
	}
	if size, ok := in.GetSize(); ok {
		if n.dir {
			return fuse.EISDIR
		}
		if st := f.before(OpTruncate, n, ""); !st.Ok() {
			return st
		}
		if err := n.data.truncate(int64(size)); err != nil {
			return fuse.ToStatus(err)
		}
	}
	// Ownership and times are not modelled (see the package comment).
	n.attr(&out.Attr)
	return fuse.OK
}

// add names a new node in the directory numbered dirID; the kernel
// holds it once, as out says.
func (f *FS) add(dirID uint64, name string, dir bool, mode uint32, out *fuse.EntryOut) (*node, fuse.Status) {
	d, st := f.dirNode(dirID)
	if !st.Ok() {
		return nil, st
	}
	if d.entries[name] != nil {
		return nil, fuse.Status(syscall.EEXIST)
	}
	kind := OpCreate
	if dir {
		kind = OpMkdir
	}
	if st := f.before(kind, &node{parent: d, name: name}, ""); !st.Ok() {
		return nil, st
	}
	c, err := f.newNode(dir, mode)
	if err != nil {
		return nil, fuse.ToStatus(err)
	}
	d.entries[name] = c
	c.links++
	c.parent, c.name = d, name
	c.entry(out)
	return c, fuse.OK
}

func (r *rawFS) Mknod(_ <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if in.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fuse.EPERM // only regular files and directories are kept
	}
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	_, st := r.f.add(in.NodeId, name, false, in.Mode, out)
	return st
}

func (r *rawFS) Mkdir(_ <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	_, st := r.f.add(in.NodeId, name, true, in.Mode, out)
	return st
}

func (r *rawFS) Create(_ <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	c, st := r.f.add(in.NodeId, name, false, in.Mode, &out.EntryOut)
	if st.Ok() {
		out.Fh = r.f.open(c, in.Flags)
	}
	return st
}

// remove takes name out of d (unlink and rmdir).
func (f *FS) remove(d *node, name string, dir bool) fuse.Status {
	c := d.entries[name]
	switch {
	case c == nil:
		return fuse.ENOENT
	case dir && !c.dir:
		return fuse.ENOTDIR
	case !dir && c.dir:
		return fuse.EISDIR
	case dir && len(c.entries) > 0:
		return fuse.Status(syscall.ENOTEMPTY)
	}
	kind := OpUnlink
	if dir {
		kind = OpRmdir
	}
	if st := f.before(kind, c, ""); !st.Ok() {
		return st
	}
	delete(d.entries, name)
	c.links--
	f.release(c)
	return fuse.OK
}

func (r *rawFS) Unlink(_ <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	d, st := f.dirNode(h.NodeId)
	if !st.Ok() {
		return st
	}
	return f.remove(d, name, false)
}

func (r *rawFS) Rmdir(_ <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	d, st := f.dirNode(h.NodeId)
	if !st.Ok() {
		return st
	}
	return f.remove(d, name, true)
}

func (r *rawFS) Rename(_ <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	src, st := f.dirNode(in.NodeId)
	if !st.Ok() {
		return st
	}
	dst, st := f.dirNode(in.Newdir)
	if !st.Ok() {
		return st
	}
	if in.Flags&renameExchange != 0 {
		return fuse.EINVAL
	}
	c := src.entries[oldName]
	if c == nil {
		return fuse.ENOENT
	}
	t := dst.entries[newName]
	switch {
	case t == c:
		return fuse.OK // the same file: rename does nothing
	case t != nil && in.Flags&renameNoReplace != 0:
		return fuse.Status(syscall.EEXIST)
	case t != nil && t.dir && !c.dir:
		return fuse.EISDIR
	case t != nil && !t.dir && c.dir:
		return fuse.ENOTDIR
	case t != nil && len(t.entries) > 0:
		return fuse.Status(syscall.ENOTEMPTY)
	}
	for a := dst; a != nil; a = a.parent {
		if a == c {
			return fuse.EINVAL // a directory into itself
		}
	}
	if st := f.before(OpRename, c, (&node{parent: dst, name: newName}).path()); !st.Ok() {
		return st
	}
	delete(src.entries, oldName)
	dst.entries[newName] = c
	c.parent, c.name = dst, newName
	if t != nil {
		t.links--
		f.release(t)
	}
	return fuse.OK
}

func (r *rawFS) Link(_ <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	d, st := f.dirNode(in.NodeId)
	if !st.Ok() {
		return st
	}
	c := f.lookup(in.Oldnodeid)
	switch {
	case c == nil:
		return fuse.ENOENT
	case c.dir:
		return fuse.EPERM
	case d.entries[name] != nil:
		return fuse.Status(syscall.EEXIST)
	}
	if st := f.before(OpLink, c, (&node{parent: d, name: name}).path()); !st.Ok() {
		return st
	}
	d.entries[name] = c
	c.links++
	c.entry(out)
	return fuse.OK
}

func (r *rawFS) Access(<-chan struct{}, *fuse.AccessIn) fuse.Status { return fuse.OK }

// open opens n and returns the handle's number.
func (f *FS) open(n *node, flags uint32) uint64 {
	f.nextFh++
	n.opens++
	h := &handle{n: n, sync: flags&syscall.O_DSYNC != 0} // O_SYNC includes O_DSYNC's bit
	if n.dir {
		h.names = []fuse.DirEntry{{Name: ".", Ino: n.id, Mode: syscall.S_IFDIR}, {Name: "..", Ino: n.id, Mode: syscall.S_IFDIR}}
		if n.parent != nil {
			h.names[1].Ino = n.parent.id
		}
		for _, name := range slices.Sorted(maps.Keys(n.entries)) {
			c := n.entries[name]
			mode := uint32(syscall.S_IFREG)
			if c.dir {
				mode = syscall.S_IFDIR
			}
			h.names = append(h.names, fuse.DirEntry{Name: name, Ino: c.id, Mode: mode})
		}
	}
	f.handles[f.nextFh] = h
	return f.nextFh
}

func (r *rawFS) Open(_ <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut != nil {
		return fuse.EIO
	}
	n := f.lookup(in.NodeId)
	if n == nil {
		return fuse.ENOENT
	}
	if n.dir {
		return fuse.EISDIR
	}
	out.Fh = f.open(n, in.Flags)
	return fuse.OK
}

func (r *rawFS) OpenDir(_ <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	d, st := f.dirNode(in.NodeId)
	if !st.Ok() {
		return st
	}
	out.Fh = f.open(d, in.Flags)
	return fuse.OK
}

// handle returns the open file numbered fh.
func (f *FS) handle(fh uint64) (*handle, fuse.Status) {
	if f.cut != nil {
		return nil, fuse.EIO
	}
	h := f.handles[fh]
	if h == nil {
		return nil, fuse.EBADF
	}
	return h, fuse.OK
}

func (r *rawFS) Read(_ <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	h, st := f.handle(in.Fh)
	if !st.Ok() {
		return nil, st
	}
	n, err := h.n.data.readAt(buf[:min(len(buf), int(in.Size))], int64(in.Offset))
	if err != nil {
		return nil, fuse.ToStatus(err)
	}
	return fuse.ReadResultData(buf[:n]), fuse.OK
}

func (r *rawFS) Write(_ <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	h, st := f.handle(in.Fh)
	if !st.Ok() {
		return 0, st
	}
	if st := f.before(OpWrite, h.n, ""); !st.Ok() {
		return 0, st
	}
	if err := h.n.data.writeAt(data, int64(in.Offset)); err != nil {
		return 0, fuse.ToStatus(err)
	}
	if h.sync {
		if err := h.n.data.sync(); err != nil {
			return 0, fuse.ToStatus(err)
		}
	}
	return uint32(len(data)), fuse.OK
}

func (r *rawFS) Flush(<-chan struct{}, *fuse.FlushIn) fuse.Status { return fuse.OK }

func (r *rawFS) Fsync(_ <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut != nil {
		return fuse.EIO
	}
	n := f.lookup(in.NodeId)
	if n == nil || n.dir {
		return fuse.EBADF
	}
	// fdatasync (FsyncFlags bit 0) keeps the bytes and the size as fsync
	// does: all a power cut can take from a file here.
	if st := f.before(OpFsync, n, ""); !st.Ok() {
		return st
	}
	if err := n.data.sync(); err != nil {
		return fuse.ToStatus(err)
	}
	n.durMode = n.mode
	return fuse.OK
}

func (r *rawFS) FsyncDir(_ <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	d, st := f.dirNode(in.NodeId)
	if !st.Ok() {
		return st
	}
	if st := f.before(OpFsyncDir, d, ""); !st.Ok() {
		return st
	}
	f.syncDir(d)
	d.durMode = d.mode
	return fuse.OK
}

func (r *rawFS) ReadDir(_ <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	h, st := f.handle(in.Fh)
	if !st.Ok() {
		return st
	}
	for i := int(in.Offset); i < len(h.names); i++ {
		e := h.names[i]
		e.Off = uint64(i + 1)
		if !out.AddDirEntry(e) {
			break
		}
	}
	return fuse.OK
}

func (r *rawFS) Release(_ <-chan struct{}, in *fuse.ReleaseIn) { r.f.close(in.Fh) }

func (r *rawFS) ReleaseDir(in *fuse.ReleaseIn) { r.f.close(in.Fh) }

func (f *FS) close(fh uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.handles[fh]
	if h == nil {
		return // or the power went meanwhile
	}
	delete(f.handles, fh)
	h.n.opens--
	f.release(h.n)
}

func (r *rawFS) StatFs(_ <-chan struct{}, _ *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	out.Bsize, out.Frsize, out.NameLen = pageSize, pageSize, 255
	out.Blocks, out.Bfree, out.Bavail = 1<<24, 1<<24, 1<<24
	out.Files, out.Ffree = 1<<20, 1<<20
	return fuse.OK
}
