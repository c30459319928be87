package feeds

import "time"

// LastSeenSaveEvery is how stale the stored last-seen time of a VM may
// grow before it is saved again. A feed sees every VM on every full
// listing, and an unchanged VM is settled by its hash without touching the
// store (which is what keeps a listing of 100k VMs cheap), so the time it
// was seen lives in memory (16 bytes a VM) and reaches the store coarsely:
// once per VM per this interval at most, all due VMs in one small
// transaction of 8-byte values per 10 s tick, apart from change sets (no
// serial, no journal). After a restart, GET /vm/:uuid's last_visit is
// then at most this much (and a tick) older than the truth until the
// first listing sees the VM again. A VM committed because it changed
// needs no save: its stored meta carries the time.
const LastSeenSaveEvery = 10 * time.Minute

// lastSeen is when a feed last reported an entry (a VM or a compute
// node) and the newest such time the store holds, Unix milliseconds.
type lastSeen struct{ at, saved int64 }

// see records a sighting at now.
func (s *lastSeen) see(now time.Time) { s.at = now.UnixMilli() }

// due reports whether the sighting must be saved.
func (s *lastSeen) due() bool { return s.at-s.saved >= LastSeenSaveEvery.Milliseconds() }

// sawServers records that a feed reported servers now; u.mu is held.
// (Tick re-applies the servers without a feed: it does not call this.)
func (u *Updater) sawServers(now time.Time) {
	for _, f := range u.servers {
		f.seen.see(now)
	}
}

// LastSeen returns when a feed last reported the VM or compute node
// uuid, as far as this process knows (false: not since it started).
func (u *Updater) LastSeen(uuid string) (time.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var s lastSeen
	if v := u.vms[uuid]; v != nil {
		s = v.seen
	} else if f := u.servers[uuid]; f != nil {
		s = f.seen
	}
	if s.at == 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(s.at), true
}

// SaveLastSeen writes the last-seen times that are due to the store, in
// one transaction. Run calls it on every tick.
func (u *Updater) SaveLastSeen() error {
	u.mu.Lock()
	due := map[string]int64{}
	for id, v := range u.vms {
		if u.known[id] && v.seen.due() { // stored: a VM not yet committed has nothing to show
			due[id] = v.seen.at
		}
	}
	for id, f := range u.servers {
		if u.vms[id] == nil && u.known[id] && f.seen.due() {
			due[id] = f.seen.at
		}
	}
	u.mu.Unlock()
	if len(due) == 0 {
		return nil
	}
	if err := u.store.SaveLastSeen(due); err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for id, at := range due {
		if v := u.vms[id]; v != nil {
			v.seen.saved = max(v.seen.saved, at)
		} else if f := u.servers[id]; f != nil {
			f.seen.saved = max(f.seen.saved, at)
		}
	}
	return nil
}
