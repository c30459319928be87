package feeds

import (
	"github.com/tritondatacenter/cns/db"
)

// SourceBatch is one change of a zone an aggregator follows (RFD 172):
// the names that changed in the source, as the records they now give the
// region zone, and the new stored copy of the source. Each source name is
// a pseudo-VM (see ExternalUUID), so the candidate machinery of the store
// merges the same name from several data centers and caps it like any
// RRset. A batch is committed whole, in one change set, so the stored
// copy and the region records never disagree.
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

// takeSources adds the queued source batches to cs and returns how many
// it took. u.mu is held.
func (u *Updater) takeSources(cs *db.ChangeSet) int {
	for _, b := range u.sources {
		cs.Sources = append(cs.Sources, b.Source)
		cs.VMs = append(cs.VMs, b.VMs...)
	}
	return len(u.sources)
}

// sourcesCommitted drops the first n batches, now stored. u.mu is held.
func (u *Updater) sourcesCommitted(n int) {
	u.sources = append(u.sources[:0], u.sources[n:]...)
}
