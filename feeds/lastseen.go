package feeds

import "time"

// LastSeenSaveEvery is how stale the stored last-seen time of a VM may
// grow before it is saved again. A feed sees every VM on every full
// listing, and an unchanged VM is settled by its hash without touching the
// store (which is what keeps a listing of 100k VMs cheap), so the time it
// was seen lives in memory (16 bytes a VM) and reaches the store coarsely:
// once per VM per this interval at most, in small transactions of 8-byte
// values apart from change sets (no serial, no journal). After a restart,
// GET /vm/:uuid's last_visit is then at most this much (and the time to
// drain the backlog) older than the truth until the first listing sees
// the VM again. A VM committed because it changed needs no save: its
// stored meta carries the time.
const LastSeenSaveEvery = 10 * time.Minute

// lastSeenPerSave bounds one save, which a commit may have to wait for:
// 10k VMs took 50-250 ms to write on these (shared, 2-core) machines,
// 100k in one transaction 0.8 s. A listing of 100k VMs drains in 20
// ticks (200 s).
const lastSeenPerSave = 5000

// lastSeen is when a feed last reported an entry (a VM or a compute
// node) and the newest such time the store holds, Unix milliseconds.
type lastSeen struct{ at, saved int64 }

// due reports whether the sighting must be saved.
func (s *lastSeen) due() bool { return s.at-s.saved >= LastSeenSaveEvery.Milliseconds() }

// saw records a sighting of entry uuid at now, and queues its save when
// it is due and the entry is stored (one not stored yet gets the time
// with its commit); u.mu is held.
func (u *Updater) saw(uuid string, s *lastSeen, now time.Time) {
	s.at = now.UnixMilli()
	if s.due() && u.stored(uuid) {
		u.seenDue[uuid] = true
	}
}

// sawServers records that a feed reported the servers now; u.mu is held.
// (Tick re-applies the servers without a feed: it does not call this.)
func (u *Updater) sawServers(now time.Time) {
	for id, f := range u.servers {
		u.saw(id, &f.seen, now)
	}
}

// seenOf returns the last-seen record of the VM or compute node uuid, nil
// when the updater holds neither; u.mu is held. A VM wins over a CN of
// the same UUID, as in change.
func (u *Updater) seenOf(uuid string) *lastSeen {
	if v := u.vms[uuid]; v != nil {
		return &v.seen
	}
	if f := u.servers[uuid]; f != nil {
		return &f.seen
	}
	return nil
}

// LastSeen returns when a feed last reported the VM or compute node
// uuid, as far as this process knows (false: not since it started).
func (u *Updater) LastSeen(uuid string) (time.Time, bool) {
	u.lock()
	defer u.mu.Unlock()
	s := u.seenOf(uuid)
	if s == nil || s.at == 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(s.at), true
}

// SaveLastSeen writes due last-seen times to the store, at most
// lastSeenPerSave in one transaction; the rest wait for the next call.
// Run calls it on every tick.
func (u *Updater) SaveLastSeen() error {
	u.lock()
	batch := map[string]int64{}
	for id := range u.seenDue {
		if len(batch) == lastSeenPerSave {
			break
		}
		delete(u.seenDue, id)
		// Only stored entries: one not committed yet gets the time
		// with its commit.
		if s := u.seenOf(id); s != nil && u.stored(id) && s.due() {
			batch[id] = s.at
		}
	}
	if len(u.seenDue) == 0 && len(batch) > 0 {
		// A restart queues every stored VM; a map keeps its largest
		// size once drained (a million entries: 56 MB, measured apart).
		u.seenDue = map[string]bool{}
	}
	u.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	err := u.store.SaveLastSeen(batch)
	u.mu.Lock()
	defer u.mu.Unlock()
	for id, at := range batch {
		s := u.seenOf(id)
		switch {
		case s == nil:
		case err != nil:
			u.seenDue[id] = true // again next time
		default:
			s.saved = max(s.saved, at)
		}
	}
	return err
}
