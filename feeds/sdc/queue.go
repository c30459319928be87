package sdc

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tritondatacenter/cns/admin/metrics"
	"github.com/tritondatacenter/cns/feeds/dc"
)

// vmQueue holds the VMs the changefeed said changed, until a worker has
// brought each up to date. Changes to one VM coalesce, so a burst of
// duplicates costs one fetch; a VM is never in two workers' hands at once;
// a failed fetch is retried after a backoff, never dropped.
type vmQueue struct {
	retry backoff       // the bounds of a failed VM's retry delay
	wake  chan struct{} // an id is ready for a worker

	mu       sync.Mutex
	pending  map[string]*pendingVM
	ready    []string
	inflight map[string]bool
	retries  map[string]*time.Timer // the requeue of each VM waiting to be retried
	timers   sync.WaitGroup         // requeues that fired and may still be running
	changes  int                    // change items received
}

type pendingVM struct {
	change *Change // the latest resourceObject seen, or nil
	// fetch: an object came that was not provably newer than one before
	// it, so only VMAPI can say which is current.
	fetch bool
	// stateChanged: an item named "state", so the VM's compute node may
	// have rebooted.
	stateChanged bool
	attempts     int
	queued       bool
	retrying     bool
	// arrived is when the first change item not yet applied came (a
	// failed attempt keeps it): the changefeed delay runs from it.
	arrived time.Time
}

func newVMQueue(retryMin, retryMax time.Duration) *vmQueue {
	return &vmQueue{
		retry:   backoff{min: retryMin, max: retryMax},
		wake:    make(chan struct{}, 1),
		pending: map[string]*pendingVM{}, inflight: map[string]bool{},
		retries: map[string]*time.Timer{},
	}
}

// add records a change to VM id (lower case).
func (q *vmQueue) add(id string, ch *Change) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.changes++
	p := q.pending[id]
	if p == nil {
		p = &pendingVM{arrived: time.Now()}
		q.pending[id] = p
	}
	if slices.Contains(ch.SubResources, "state") {
		p.stateChanged = true
	}
	if ch.Object != nil && !p.fetch {
		// Keep an object only while each is newer than the one before:
		// one that looks older may be the newer after a migration to a
		// CN whose clock is behind, or a reordered item; VMAPI decides.
		switch {
		case p.change == nil || newer(ch.Object, p.change.Object):
			p.change = ch
		case !sameRaw(p.change, ch):
			p.change, p.fetch = nil, true
		}
	}
	if !p.queued && !p.retrying && !q.inflight[id] {
		q.push(id, p)
	}
}

// push queues p for a worker; q.mu is held.
func (q *vmQueue) push(id string, p *pendingVM) {
	p.queued = true
	q.ready = append(q.ready, id)
	signal(q.wake)
}

// take hands the next ready VM to a worker, which owns it until finish.
func (q *vmQueue) take() (string, *pendingVM, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.ready) > 0 {
		id := q.ready[0]
		q.ready = q.ready[1:]
		p := q.pending[id]
		if p == nil || !p.queued {
			continue
		}
		delete(q.pending, id)
		p.queued = false
		q.inflight[id] = true
		if len(q.ready) > 0 {
			signal(q.wake) // more for another worker
		}
		return id, p, true
	}
	q.ready = nil
	return "", nil, false
}

// finish settles a processed VM: a failure is queued again after a
// backoff (never dropped), and a change that arrived meanwhile is queued.
func (q *vmQueue) finish(id string, p *pendingVM, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inflight, id)
	next := q.pending[id]
	if err != nil {
		if next == nil {
			next = p
			q.pending[id] = p
		}
		next.arrived = p.arrived // p's change is not applied yet
		next.attempts = p.attempts + 1
		next.queued = false
		next.retrying = true
		b := q.retry
		var delay time.Duration
		for range min(next.attempts, 16) {
			delay = b.next()
		}
		q.timers.Add(1)
		q.retries[id] = time.AfterFunc(delay, func() {
			defer q.timers.Done()
			q.requeue(id)
		})
		return
	}
	if next != nil && !next.queued && !next.retrying {
		q.push(id, next)
	}
}

// requeue ends VM id's retry delay.
func (q *vmQueue) requeue(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.retries, id)
	q.requeueLocked(id)
}

func (q *vmQueue) requeueLocked(id string) {
	p := q.pending[id]
	if p == nil || !p.retrying {
		return
	}
	p.retrying = false
	if !q.inflight[id] && !p.queued {
		q.push(id, p)
	}
}

// stop ends every retry delay: a VM waiting for one is queued at once
// (for the next start, if any), and a requeue already firing is waited
// for, so that no timer of the queue outlives the feed's Run. Run calls it
// once its workers are done, so no failure starts a timer after it.
func (q *vmQueue) stop() {
	q.mu.Lock()
	for id, t := range q.retries {
		delete(q.retries, id)
		if t.Stop() {
			q.timers.Done() // its function will not run
			q.requeueLocked(id)
		}
	}
	q.mu.Unlock()
	q.timers.Wait()
}

// stats returns the change items received and the VMs waiting.
func (q *vmQueue) stats() (changes, pending int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.changes, len(q.pending)
}

// watchChangefeed takes the changefeed's events: a bootstrap asks for a
// full listing, a change item goes to the queue.
func (f *Feed) watchChangefeed(ctx context.Context, events <-chan ChangefeedEvent) {
	for {
		var ev ChangefeedEvent
		select {
		case <-ctx.Done():
			return
		case ev = <-events:
		}
		switch {
		case ev.Bootstrap:
			f.mu.Lock()
			f.cfUp = true
			f.mu.Unlock()
			f.sink.ReportFeed(HealthChangefeed, nil)
			f.log.Info("changefeed bootstrapped; full listing due")
			f.bootOnce.Do(func() { close(f.bootstrap) })
			f.requestRelist()
		case ev.Change != nil:
			f.enqueue(ev.Change)
		case ev.Err != nil:
			f.mu.Lock()
			f.cfUp = false
			f.mu.Unlock()
			f.sink.ReportFeed(HealthChangefeed, ev.Err)
		}
	}
}

// enqueue hands a change item to the queue.
func (f *Feed) enqueue(ch *Change) {
	id := strings.ToLower(ch.UUID)
	if !dc.IsUUID(id) {
		return
	}
	f.queue.add(id, ch)
}

func hashRaw(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// worker fetches and applies changed VMs once the first full listing
// has been applied (before it, the world they would be computed in is
// not known yet).
func (f *Feed) worker(ctx context.Context) {
	select {
	case <-f.synced:
	case <-ctx.Done():
		return
	}
	for {
		id, p, ok := f.queue.take()
		if !ok {
			select {
			case <-f.queue.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		err := f.process(ctx, id, p)
		f.queue.finish(id, p, err)
		if ctx.Err() != nil {
			return
		}
	}
}

// process brings one changed VM up to date: from the change's
// resourceObject when it is provably newer than what was applied, else
// from GET /vms/:uuid. A VM VMAPI does not know is removed only once a
// listing by uuid confirms it.
func (f *Feed) process(ctx context.Context, id string, p *pendingVM) error {
	if ch := p.change; ch != nil && !p.fetch {
		switch f.judge(id, ch) {
		case objStale:
			return nil
		case objApply:
			f.applyChanged(ctx, id, ch.Object, hashRaw(ch.Raw), p)
			return nil
		}
	}
	vm, err := f.vmapi.GetVM(ctx, id)
	if errors.Is(err, ErrNotFound) {
		page, lerr := f.vmapi.ListVMs(ctx, VMFilter{UUID: id}, 1, "", 0)
		if lerr != nil {
			f.sink.ReportFeed(HealthVMAPI, lerr)
			return lerr
		}
		if len(page.VMs) == 0 {
			f.log.Info("VM unknown to VMAPI; removing it", "vm", id)
			f.sink.RemoveVM(id, "VM unknown to VMAPI") // (a listing's page from before does not bring it back)
			f.delivered(p)
			f.mu.Lock()
			delete(f.applied, id)
			delete(f.destroyed, id)
			f.mu.Unlock()
			return nil
		}
		vm, err = &page.VMs[0], nil
	}
	if err != nil {
		if ctx.Err() == nil {
			f.sink.ReportFeed(HealthVMAPI, err)
			f.log.Warn("fetching a changed VM failed; will retry", "vm", id, "err", err, "attempt", p.attempts+1)
		}
		return err
	}
	f.sink.ReportFeed(HealthVMAPI, nil)
	f.applyChanged(ctx, id, vm, 0, p)
	return nil
}

// applyChanged applies a changed VM once its owner and networks are
// known, and has its CN looked at when its state changed.
func (f *Feed) applyChanged(ctx context.Context, id string, vm *dc.VM, hash uint64, p *pendingVM) {
	f.prepare(ctx, vm)
	f.applyVM(id, vm, hash, "changefeed")
	f.delivered(p)
	if p.stateChanged {
		f.serverChanged(vm.ServerUUID)
	}
}

// delivered records that p's change reached the sink.
func (f *Feed) delivered(p *pendingVM) {
	d := time.Since(p.arrived)
	f.mu.Lock()
	f.delay.Observe(d.Seconds())
	f.mu.Unlock()
}

// DelayHistogram returns, for every VM change the changefeed announced
// and the feed handed on so far, the time from the change item's arrival
// to the VM's new state reaching the updater: the queue, the fetch from
// VMAPI when the item's object could not be used, the owner's and
// networks' lookups, and the retries after failures.
func (f *Feed) DelayHistogram() metrics.Histogram {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay.Clone()
}

// prepare looks up what a VM about to be applied needs: its owner (UFDS)
// and its networks (NAPI). A failure is reported and retried elsewhere;
// the VM is applied anyway.
func (f *Feed) prepare(ctx context.Context, vm *dc.VM) {
	f.ensureOwner(ctx, vm.OwnerUUID)
	_ = f.resolveNetworks(ctx, []*dc.VM{vm})
}

type judgement int

const (
	objFetch judgement = iota
	objApply
	objStale
)

// judge decides what a resourceObject is worth: applied when its
// last_modified is after that of the state last applied, ignored when it
// is that very state again, fetched otherwise. An object that looks older
// is fetched, not dropped: last_modified comes from the compute node's
// clock, which can be behind the previous CN's after a migration, so
// only VMAPI can say whether it is stale (the publisher also reorders).
func (f *Feed) judge(id string, ch *Change) judgement {
	t, ok := modified(ch.Object)
	if !ok {
		return objFetch
	}
	f.mu.Lock()
	prev, seen := f.applied[id]
	f.mu.Unlock()
	switch {
	case !seen || t.After(prev.modified):
		return objApply
	case prev.hash != 0 && prev.hash == hashRaw(ch.Raw):
		return objStale
	}
	return objFetch
}

// applyVM hands one VM's current state to the sink (which keeps it over
// the copy of a listing begun before).
func (f *Feed) applyVM(id string, vm *dc.VM, hash uint64, cause string) {
	f.sink.SetVM(vm, cause)

	now := f.now()
	f.mu.Lock()
	if t, ok := modified(vm); ok {
		f.applied[id] = appliedVM{modified: t, hash: hash, at: now}
	}
	if vm.Destroyed.Set || vm.State == "destroyed" || vm.State == "failed" {
		if _, ok := f.destroyed[id]; !ok {
			f.destroyed[id] = now
		}
	} else {
		delete(f.destroyed, id)
	}
	f.status.Applied++
	f.mu.Unlock()
}

func modified(vm *dc.VM) (time.Time, bool) {
	if vm == nil {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, vm.LastModified)
	return t, err == nil
}

// newer reports whether a was modified strictly after b.
func newer(a, b *dc.VM) bool {
	ta, okA := modified(a)
	tb, okB := modified(b)
	return okA && okB && ta.After(tb)
}

func sameRaw(a, b *Change) bool { return string(a.Raw) == string(b.Raw) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
