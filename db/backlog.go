package db

import "sync"

// Backlog is the store's one signal of a backlog: a first load or a
// restart's reconcile committed in chunks, one commit after another. While
// it is open, every commit that lands is a part of it and more follow at
// once, so a hook may put off work the next commits would redo (serve
// builds a zone's table once, after the backlog, instead of for every
// chunk). The writer opens it before each of a backlog's commits and
// closes it before any other commit, or once the backlog is in: while a
// commit's hooks run, it says whether that commit is a backlog's part.
type Backlog struct {
	mu   sync.Mutex
	open bool
	end  chan struct{} // closed, and replaced, when an open backlog closes
}

func newBacklog() *Backlog { return &Backlog{end: make(chan struct{})} }

// Backlog returns the store's backlog signal.
func (d *DB) Backlog() *Backlog { return d.backlog }

// Open says that a backlog is being committed.
func (b *Backlog) Open() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open = true
}

// Close says that the backlog is in; the channels NextEnd returned are
// closed. Closing a backlog that is not open does nothing.
func (b *Backlog) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return
	}
	b.open = false
	close(b.end)
	b.end = make(chan struct{})
}

// IsOpen reports whether a backlog is being committed: a commit's hooks
// ask it about the commit they are given.
func (b *Backlog) IsOpen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open
}

// NextEnd returns a channel closed when the next backlog to close (the
// one open now, or a later one) closes.
func (b *Backlog) NextEnd() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.end
}
