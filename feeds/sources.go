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
	VMs    []db.VMChange
	Cause  string
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
	u.sources = append(u.sources, b)
	u.causes[b.Cause]++
	u.wake()
}

// maxPseudoVMsPerCommit bounds the pseudo-VMs of one change set: a
// pseudo-VM is one name, a VM four or five, so this is about the records
// of maxVMsPerCommit VMs; fewer, larger commits spare a first transfer
// most of its fsyncs.
const maxPseudoVMsPerCommit = 4 * maxVMsPerCommit

// sourceTake is what one change set took from the queued source batches:
// n whole batches, then part VMs of the next one.
type sourceTake struct{ n, part int }

// takeSources adds queued source batches to cs, up to
// maxPseudoVMsPerCommit pseudo-VMs beyond what cs holds (at least one batch or chunk). u.mu is
// held.
func (u *Updater) takeSources(cs *db.ChangeSet) sourceTake {
	var tk sourceTake
	for _, b := range u.sources {
		room := maxPseudoVMsPerCommit - len(cs.VMs)
		if len(b.VMs) > room {
			if room <= 0 && (tk.n > 0 || len(cs.VMs) > 0) {
				break
			}
			tk.part = max(room, 1)
			cs.VMs = append(cs.VMs, b.VMs[:tk.part]...)
			break
		}
		cs.Sources = append(cs.Sources, b.Source)
		cs.VMs = append(cs.VMs, b.VMs...)
		tk.n++
	}
	return tk
}

// sourcesCommitted drops what a stored change set took. u.mu is held.
func (u *Updater) sourcesCommitted(tk sourceTake) {
	if tk.part > 0 {
		head := &u.sources[tk.n]
		head.VMs = head.VMs[tk.part:]
	}
	rest := copy(u.sources, u.sources[tk.n:])
	clear(u.sources[rest:]) // the committed batches' records go now
	u.sources = u.sources[:rest]
}

// sourcesPending reports whether source batches wait. u.mu is held.
func (u *Updater) sourcesPending() bool { return len(u.sources) > 0 }

// pending counts the VMs and pseudo-VMs waiting. u.mu is held.
func (u *Updater) pending() int {
	n := len(u.dirty)
	for _, b := range u.sources {
		n += len(b.VMs)
	}
	return n
}
