package sdc

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// ownerCache holds the accounts that own the VMs the feed applied, as
// UFDS last described them, the owners whose lookup failed (retried by the
// changelog watcher), and where the UFDS changelog stood before the first
// listing looked owners up.
type ownerCache struct {
	mu      sync.Mutex
	users   map[string]cachedUser // by uuid, lower case
	missing map[string]bool       // owners whose lookup failed
	admin   string                // the admin account's uuid, once known
	// changelogStart is the UFDS change number read before the first
	// listing looked owners up (-1 until then).
	changelogStart int64
}

type cachedUser struct {
	user    dc.User
	fetched time.Time
}

func newOwnerCache() *ownerCache {
	return &ownerCache{users: map[string]cachedUser{}, missing: map[string]bool{}, changelogStart: -1}
}

func (c *ownerCache) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.users[id]
	return ok
}

func (c *ownerCache) markMissing(id string) {
	c.mu.Lock()
	c.missing[id] = true
	c.mu.Unlock()
}

func (c *ownerCache) forgetMissing(id string) {
	c.mu.Lock()
	delete(c.missing, id)
	c.mu.Unlock()
}

func (c *ownerCache) adminUUID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.admin
}

func (c *ownerCache) start() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changelogStart
}

func (c *ownerCache) setStart(n int64) {
	c.mu.Lock()
	c.changelogStart = n
	c.mu.Unlock()
}

// put caches usr, fetched at now, and when it differs from what was
// cached hands it to apply, under the cache's lock: of two puts of one
// account, the one cached last is the one applied last.
func (c *ownerCache) put(usr dc.User, now time.Time, apply func(dc.User)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.users[usr.UUID]
	c.users[usr.UUID] = cachedUser{user: usr, fetched: now}
	delete(c.missing, usr.UUID)
	delete(c.missing, strings.ToLower(usr.Login))
	if usr.Login == "admin" {
		c.admin = usr.UUID
	}
	if !had || old.user != usr {
		apply(usr)
	}
}

// due returns the owners that are not cached or whose entry is older than
// userTTL at now, plus "admin" while the admin account is unknown.
func (c *ownerCache) due(owners map[string]bool, now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var todo []string
	for o := range owners {
		if u, ok := c.users[o]; !ok || now.Sub(u.fetched) > userTTL {
			todo = append(todo, o)
		}
	}
	if c.admin == "" {
		todo = append(todo, "admin")
	}
	return todo
}

// found caches the accounts a round of lookups of todo found, at now, and
// marks the owners in todo it did not find as missing.
func (c *ownerCache) found(users []dc.User, todo []string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, usr := range users {
		c.users[usr.UUID] = cachedUser{user: usr, fetched: now}
		delete(c.missing, usr.UUID)
		if usr.Login == "admin" {
			c.admin = usr.UUID
		}
	}
	for _, o := range todo {
		if _, ok := c.users[o]; !ok && o != "admin" {
			c.missing[o] = true
		}
	}
}

// keep returns the cached accounts that own something (owners, or the
// admin account), or were fetched since a listing began (since: the owner
// of a VM a change brought meanwhile), and forgets the others.
func (c *ownerCache) keep(owners map[string]bool, admin string, since time.Time) []dc.User {
	c.mu.Lock()
	defer c.mu.Unlock()
	var users []dc.User
	for o, u := range c.users {
		if owners[o] || o == admin || !u.fetched.Before(since) {
			users = append(users, u.user)
		} else {
			delete(c.users, o) // owns nothing any more
		}
	}
	return users
}

// addMissing adds the owners whose lookup failed to refresh.
func (c *ownerCache) addMissing(refresh map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for o := range c.missing {
		refresh[o] = true
	}
}

// addCached adds every cached account to refresh.
func (c *ownerCache) addCached(refresh map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for o := range c.users {
		refresh[o] = true
	}
}

// watched reports whether a changelog entry about account id matters: it
// is cached, or its lookup failed.
func (c *ownerCache) watched(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, cached := c.users[id]
	return cached || c.missing[id]
}

// ensureOwner makes sure the sink knows the owner of a VM about to be
// applied, looking it up when it is not cached. A failed lookup leaves
// the owner to the UFDS watcher's retries; meanwhile the sink keeps the
// owner's VMs as they are.
func (f *Feed) ensureOwner(ctx context.Context, owner string) {
	owner = strings.ToLower(owner)
	if owner == "" || f.owners.has(owner) {
		return
	}
	usr, err := f.ufds.GetUser(ctx, owner)
	if err != nil {
		f.owners.markMissing(owner)
		if !errors.Is(err, ErrNotFound) {
			f.sink.ReportFeed(HealthUFDS, err)
		}
		return
	}
	f.setUser(*usr, "owner looked up")
}

// setUser caches an account and hands it to the sink when it changed.
func (f *Feed) setUser(usr dc.User, cause string) {
	f.owners.put(usr, f.now(), func(usr dc.User) { f.sink.SetUser(usr, cause) })
}

// lookUpOwners brings the owners of a listing's VMs into the cache before
// the listing is applied. The first listing also notes where the UFDS
// changelog stands, so that changes after this point reach the watcher,
// even those made between the lookups and its first look.
func (f *Feed) lookUpOwners(ctx context.Context, owners map[string]bool) {
	if f.owners.start() < 0 {
		if n, err := f.ufds.LatestChangeNumber(ctx); err == nil {
			f.owners.setStart(n)
		}
	}
	if err := f.resolveOwners(ctx, owners); err != nil {
		f.sink.ReportFeed(HealthUFDS, err)
		f.log.Warn("owner lookups failed; their VMs keep their records until UFDS answers", "err", err)
	}
}

// resolveOwners looks up, a few at a time, every owner that is not
// cached or whose cache entry is old, plus the admin account (owner of
// the CN cmon names). It stops at the first failure other than "no such
// account": UFDS is down, and the rest are left to the watcher.
func (f *Feed) resolveOwners(ctx context.Context, owners map[string]bool) error {
	now := f.now()
	todo := f.owners.due(owners, now)
	if len(todo) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var failed error
	var found []dc.User
	sem := make(chan struct{}, f.cfg.Workers)
	var wg sync.WaitGroup
	for _, o := range todo {
		sem <- struct{}{}
		if ctx.Err() != nil {
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			usr, err := f.ufds.GetUser(ctx, o)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				found = append(found, *usr)
			case errors.Is(err, ErrNotFound):
			case failed == nil:
				failed = err
				cancel()
			}
		})
	}
	wg.Wait()
	f.owners.found(found, todo, now)
	return failed
}

// watchUFDS follows the UFDS changelog: an account whose flags or login
// changed is looked up again and handed to the sink, within one check
// period. It also retries the owners whose lookup failed.
func (f *Feed) watchUFDS(ctx context.Context) {
	last := f.owners.start() // where the changelog stood before the first listing's lookups
	refresh := map[string]bool{}
	b := backoff{min: f.cfg.RetryMin, max: f.cfg.RetryMax}
	var retryAt time.Time
	for {
		if !sleep(ctx, f.cfg.UFDSInterval) {
			return
		}
		err := f.readChangelog(ctx, &last, refresh)
		if f.now().After(retryAt) {
			f.owners.addMissing(refresh)
		}
		if err == nil {
			err = f.refreshUsers(ctx, refresh)
		}
		if err != nil {
			retryAt = f.now().Add(b.next())
			f.sink.ReportFeed(HealthUFDS, err)
			continue
		}
		b.reset()
		f.sink.ReportFeed(HealthUFDS, nil)
	}
}

// flagAttrs are the account attributes that change what cns publishes.
var flagAttrs = []string{"triton_cns_enabled", "approved_for_provisioning", "login"}

// readChangelog reads the entries after *last, page by page, and adds to
// refresh the cached accounts they touched. With no starting point (UFDS
// was down during the first listing), the first call only records where
// the changelog stands. A number that went backwards (UFDS restored) marks
// every cached account for a fresh look.
func (f *Feed) readChangelog(ctx context.Context, last *int64, refresh map[string]bool) error {
	latest, err := f.ufds.LatestChangeNumber(ctx)
	if err != nil {
		return err
	}
	switch {
	case *last < 0:
		*last = latest
		return nil
	case latest < *last:
		f.log.Warn("UFDS changelog went backwards; looking every owner up again", "was", *last, "now", latest)
		f.owners.addCached(refresh)
		*last = latest
		return nil
	case latest == *last:
		return nil
	}
	for {
		entries, err := f.ufds.ChangesSince(ctx, *last+1, ChangelogPage)
		if err != nil {
			return err
		}
		for i := range entries {
			e := &entries[i]
			id, ok := e.AccountUUID()
			if !ok {
				continue
			}
			if f.owners.watched(id) && (e.ChangeType == "add" || e.Touches(flagAttrs...)) {
				refresh[id] = true
			}
			// The API's answer about the account is looked up afresh.
			f.lookups.accounts.forget(func(u dc.User) bool { return u.UUID == id })
		}
		if len(entries) > 0 {
			*last = max(*last, entries[len(entries)-1].Number)
		}
		if len(entries) < ChangelogPage {
			*last = max(*last, latest)
			return nil
		}
	}
}

// refreshUsers looks the accounts in refresh up and applies them,
// removing each that succeeded (or that UFDS no longer has: an account
// deletion leaves its VMs as they are).
func (f *Feed) refreshUsers(ctx context.Context, refresh map[string]bool) error {
	for id := range refresh {
		usr, err := f.ufds.GetUser(ctx, id)
		switch {
		case err == nil:
			f.setUser(*usr, "ufds changelog")
		case errors.Is(err, ErrNotFound):
			f.owners.forgetMissing(id) // looked up again by the next full listing
		default:
			return err
		}
		delete(refresh, id)
	}
	return nil
}
