package sdc

import (
	"context"
	"sync"
	"time"
)

// lookups is a small cache of answers fetched on demand, for the API's
// questions about what the feed has not listed (Feed.Account,
// Feed.Network). What it guarantees the service it asks:
//
//   - one fetch per key at a time: concurrent callers wait for the same
//     answer (a burst of provisioning requests for one new account is one
//     UFDS search);
//   - at most `fetching` fetches at once, whatever the keys, so that a
//     flood of distinct questions cannot load UFDS or NAPI;
//   - a found answer is kept for ttl, at most max of them (the oldest go
//     first);
//   - "not found" and failures are not kept: an account created a moment
//     after a failed provisioning is found at the next attempt, and an
//     outage ends as soon as the service answers.
type lookups[V any] struct {
	ttl time.Duration
	max int
	now func() time.Time
	sem chan struct{} // one token per fetch in progress

	mu      sync.Mutex
	entries map[string]*lookup[V]
}

// lookup is one key's answer, or its fetch in progress (done open).
type lookup[V any] struct {
	done    chan struct{}
	val     V
	found   bool
	err     error
	expires time.Time // set when done, for found answers
}

func newLookups[V any](ttl time.Duration, max, fetching int, now func() time.Time) *lookups[V] {
	return &lookups[V]{ttl: ttl, max: max, now: now, sem: make(chan struct{}, fetching), entries: map[string]*lookup[V]{}}
}

// get returns key's answer: the kept one while it is fresh, else what
// fetch says. The first caller of a key fetches, under timeout and
// whatever becomes of its own ctx (the others wait for that answer); each
// caller stops waiting when its ctx ends.
func (c *lookups[V]) get(ctx context.Context, key string, timeout time.Duration, fetch func(context.Context) (V, bool, error)) (V, bool, error) {
	c.mu.Lock()
	e, ok := c.entries[key]
	if ok && isDone(e.done) && !c.now().Before(e.expires) {
		delete(c.entries, key)
		ok = false
	}
	if !ok {
		c.evictLocked()
		e = &lookup[V]{done: make(chan struct{})}
		c.entries[key] = e
	}
	c.mu.Unlock()
	if !ok {
		c.fetch(ctx, key, e, timeout, fetch)
	}
	select {
	case <-e.done:
		return e.val, e.found, e.err
	case <-ctx.Done():
		var zero V
		return zero, false, ctx.Err()
	}
}

// fetch fills e in, once a fetch token is free, and keeps it only when it
// was found.
func (c *lookups[V]) fetch(ctx context.Context, key string, e *lookup[V], timeout time.Duration, fetch func(context.Context) (V, bool, error)) {
	select {
	case c.sem <- struct{}{}:
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		e.val, e.found, e.err = fetch(fctx)
		cancel()
		<-c.sem
	case <-ctx.Done():
		e.err = ctx.Err()
	}
	c.mu.Lock()
	if e.found && e.err == nil {
		e.expires = c.now().Add(c.ttl)
	} else if c.entries[key] == e {
		delete(c.entries, key)
	}
	close(e.done)
	c.mu.Unlock()
}

// evictLocked makes room for one more entry: the expired answers go,
// then, while the cache is full, the one closest to expiry. Fetches in
// progress stay (they are bounded by the callers waiting on them).
func (c *lookups[V]) evictLocked() {
	if len(c.entries) < c.max {
		return
	}
	now := c.now()
	oldest, oldestKey := time.Time{}, ""
	for k, e := range c.entries {
		if !isDone(e.done) {
			continue
		}
		if !now.Before(e.expires) {
			delete(c.entries, k)
			continue
		}
		if oldestKey == "" || e.expires.Before(oldest) {
			oldest, oldestKey = e.expires, k
		}
	}
	if len(c.entries) >= c.max && oldestKey != "" {
		delete(c.entries, oldestKey)
	}
}

// forget drops the kept answers for which drop is true.
func (c *lookups[V]) forget(drop func(V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if isDone(e.done) && e.found && drop(e.val) {
			delete(c.entries, k)
		}
	}
}

func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
