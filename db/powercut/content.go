//go:build linux

package powercut

import (
	"io"
	"os"
)

// pageSize is the unit in which unsynced writes are kept.
const pageSize = 4096

// content is a regular file's bytes: what the disk holds (home, a file
// in the store directory, of durSize bytes) with the writes not yet
// synced laid over it in memory, page by page.
//
// Invariants: hidden <= size, and hidden <= durSize; home's bytes from
// hidden on are not part of the file (a truncation not yet synced); no
// byte at or past size reads as anything but zero, in a dirty page or
// from home.
type content struct {
	home    *os.File
	size    int64 // the file's size as its users see it
	durSize int64 // home's size: the size after a power cut
	hidden  int64
	dirty   map[int64][]byte // page index → pageSize bytes
}

func newContent(home *os.File, size int64) *content {
	return &content{home: home, size: size, durSize: size, hidden: size}
}

// readAt reads what the file holds at off, up to len(p) bytes and its
// end.
func (c *content) readAt(p []byte, off int64) (int, error) {
	if off >= c.size {
		return 0, nil
	}
	p = p[:min(int64(len(p)), c.size-off)]
	for done := 0; done < len(p); {
		pos := off + int64(done)
		idx, in := pos/pageSize, int(pos%pageSize)
		n := min(len(p)-done, pageSize-in)
		if err := c.readPage(p[done:done+n], idx, in); err != nil {
			return done, err
		}
		done += n
	}
	return len(p), nil
}

// readPage fills p from page idx, starting at byte in of it.
func (c *content) readPage(p []byte, idx int64, in int) error {
	if pg, ok := c.dirty[idx]; ok {
		copy(p, pg[in:])
		return nil
	}
	pos := idx*pageSize + int64(in)
	clear(p)
	if pos >= c.hidden {
		return nil
	}
	n, err := c.home.ReadAt(p[:min(int64(len(p)), c.hidden-pos)], pos)
	if err == io.EOF && n >= 0 {
		err = nil // home is shorter than hidden only if something else cut it
	}
	return err
}

// page returns page idx for writing, made dirty with what it holds.
func (c *content) page(idx int64) ([]byte, error) {
	if pg, ok := c.dirty[idx]; ok {
		return pg, nil
	}
	pg := make([]byte, pageSize)
	if err := c.readPage(pg, idx, 0); err != nil {
		return nil, err
	}
	if c.dirty == nil {
		c.dirty = map[int64][]byte{}
	}
	c.dirty[idx] = pg
	return pg, nil
}

// writeAt writes p at off, in memory.
func (c *content) writeAt(p []byte, off int64) error {
	for done := 0; done < len(p); {
		pos := off + int64(done)
		idx, in := pos/pageSize, int(pos%pageSize)
		pg, err := c.page(idx)
		if err != nil {
			return err
		}
		done += copy(pg[in:], p[done:])
	}
	c.size = max(c.size, off+int64(len(p)))
	return nil
}

// truncate sets the size, in memory.
func (c *content) truncate(size int64) error {
	if size < c.size {
		for idx := range c.dirty {
			if idx*pageSize >= size {
				delete(c.dirty, idx)
			}
		}
		if in := size % pageSize; in != 0 {
			pg, err := c.page(size / pageSize)
			if err != nil {
				return err
			}
			clear(pg[in:])
		}
		c.hidden = min(c.hidden, size)
	}
	c.size = size
	return nil
}

// sync writes what is in memory to home: after it, a power cut keeps the
// file as it is now.
func (c *content) sync() error {
	if c.hidden < c.durSize {
		if err := c.home.Truncate(c.hidden); err != nil {
			return err
		}
	}
	for idx, pg := range c.dirty {
		pos := idx * pageSize
		if pos >= c.size {
			continue
		}
		if _, err := c.home.WriteAt(pg[:min(pageSize, c.size-pos)], pos); err != nil {
			return err
		}
	}
	if err := c.home.Truncate(c.size); err != nil {
		return err
	}
	c.durSize, c.hidden, c.dirty = c.size, c.size, nil
	return nil
}

// lose drops what was not synced: the file is what home holds.
func (c *content) lose() (pages int) {
	pages = len(c.dirty)
	c.size, c.hidden, c.dirty = c.durSize, c.durSize, nil
	return pages
}
