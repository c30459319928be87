package sdc

import "context"

// reaper forgets VMs seen destroyed at least one period ago, and the
// change bookkeeping of VMs that have been quiet for as long.
func (f *Feed) reaper(ctx context.Context) {
	for {
		if !sleep(ctx, f.cfg.ReaperInterval) {
			return
		}
		f.reap()
	}
}

// reap is one pass of the reaper.
func (f *Feed) reap() {
	now := f.now()
	var gone []string
	f.mu.Lock()
	for id, t := range f.destroyed {
		if now.Sub(t) >= f.cfg.ReaperInterval {
			gone = append(gone, id)
			delete(f.destroyed, id)
		}
	}
	for id, a := range f.applied {
		if now.Sub(a.at) >= f.cfg.ReaperInterval {
			delete(f.applied, id)
		}
	}
	f.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	for _, id := range gone {
		f.sink.RemoveVM(id, "destroyed VM reaped")
	}
	f.log.Info("destroyed VMs reaped", "vms", len(gone))
}
