package feeds

import (
	"github.com/tritondatacenter/cns/db"
)

// SourceBatch is one change of a zone an aggregator follows (RFD 172):
// the names that changed in the source, as the records they now give the
// region zone, and the new stored copy of the source. Each source name is
// a pseudo-VM (see ExternalUUID), so the candidate machinery of the store
// merges the same name from several data centers and caps it like any
// RRset.
//
// A large batch (a source's first transfer) is committed in chunks of
// pseudo-VMs like a large VM batch, and its stored copy rides with the
// last chunk: until then the stored copy is the previous one, so a crash
// in between makes the aggregator transfer the same changes again (they
// are whole replacements of names, so applying them twice is harmless)
// and the copy never claims a serial whose records are not all stored.
type SourceBatch struct {
	Source db.SourceUpdate
	// N pseudo-VM changes, in UUID order: VM(i) builds the i-th when its
	// chunk is committed, so a first transfer's region records are never
	// all held at once. VM runs in the updater, after SetSource: it must
	// read only what no longer changes.
	N     int
	VM    func(i int) db.VMChange
	Cause string
}

// SourceVMs is a SourceBatch's N and VM for changes already built.
func SourceVMs(vms []db.VMChange) (int, func(int) db.VMChange) {
	return len(vms), func(i int) db.VMChange { return vms[i] }
}

// queuedSource is a batch waiting, with how many of its pseudo-VMs are
// committed.
type queuedSource struct {
	SourceBatch
	done int
}

// ExternalUUID reports whether uuid names a pseudo-VM of an aggregated
// source: those carry UUID version 8 (RFC 9562, "custom"), which no VM
// has (Triton's are version 4). A full inventory listing leaves them alone.
func ExternalUUID(uuid string) bool { return len(uuid) == 36 && uuid[14] == '8' }

// SetSource queues a batch for the next commit, after the batches queued
// before it.
func (u *Updater) SetSource(b SourceBatch) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sources = append(u.sources, queuedSource{SourceBatch: b})
	u.causes[b.Cause]++
	u.wake()
}

// maxPseudoVMsPerCommit bounds the pseudo-VMs of one change set: a
// pseudo-VM is one name, a VM four or five, so this is about the records
// of 5000 VMs; fewer, larger commits spare a first transfer most of its
// fsyncs.
const maxPseudoVMsPerCommit = 20000

// sourceTake is what one change set took from the queued source batches:
// n whole batches, then part VMs of the next one.
type sourceTake struct{ n, part int }

// takeSources adds queued source batches to cs, up to
// maxPseudoVMsPerCommit pseudo-VMs beyond what cs holds (at least one batch or chunk). u.mu is
// held.
func (u *Updater) takeSources(cs *db.ChangeSet) sourceTake {
	var tk sourceTake
	for i := range u.sources {
		q := &u.sources[i]
		left, room := q.N-q.done, maxPseudoVMsPerCommit-len(cs.VMs)
		if left > room {
			if room <= 0 && (tk.n > 0 || len(cs.VMs) > 0) {
				break
			}
			tk.part = max(room, 1)
			for j := q.done; j < q.done+tk.part; j++ {
				cs.VMs = append(cs.VMs, q.VM(j))
			}
			break
		}
		cs.Sources = append(cs.Sources, q.Source)
		for j := q.done; j < q.N; j++ {
			cs.VMs = append(cs.VMs, q.VM(j))
		}
		tk.n++
	}
	return tk
}

// sourcesCommitted drops what a stored change set took. u.mu is held.
func (u *Updater) sourcesCommitted(tk sourceTake) {
	if tk.part > 0 {
		u.sources[tk.n].done += tk.part
	}
	rest := copy(u.sources, u.sources[tk.n:])
	clear(u.sources[rest:]) // the committed batches' records go now
	u.sources = u.sources[:rest]
}

// sourcesPending reports whether source batches wait. u.mu is held.
func (u *Updater) sourcesPending() bool { return len(u.sources) > 0 }

// pending counts the VMs and pseudo-VMs waiting. u.mu is held.
func (u *Updater) pending() int {
	n := u.sched.pending()
	for _, q := range u.sources {
		n += q.N - q.done
	}
	return n
}
