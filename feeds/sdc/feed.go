package sdc

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// The names the feed reports its health under, one per service.
const (
	HealthVMAPI      = "vmapi"
	HealthChangefeed = "changefeed"
	HealthCNAPI      = "cnapi"
	HealthNAPI       = "napi"
	HealthUFDS       = "ufds"
)

// Defaults of Config. The full listing is a safety net behind the
// changefeed: the reference's SAPI value, 10 s, would list 100k VMs (200
// pages) six times a minute, so configured values are raised to
// MinFullPollInterval (see ServeFullPollInterval).
const (
	DefaultFullPollInterval     = 5 * time.Minute
	MinFullPollInterval         = 5 * time.Minute
	DefaultFallbackPollInterval = time.Minute
	DefaultReaperInterval       = 5 * time.Minute
	DefaultCNAPIInterval        = time.Minute // the reference's
	DefaultNAPIInterval         = time.Minute
	DefaultUFDSInterval         = 2 * time.Second // the reference's watcher: 5 s
	DefaultWorkers              = 8
	DefaultRetryMin             = 2 * time.Second
	DefaultRetryMax             = 30 * time.Second
	// cnapiMinGap spaces the CNAPI polls that VM state changes ask for.
	cnapiMinGap = 2 * time.Second
	// userTTL is how long a looked-up account is trusted without a
	// changelog entry about it before a full listing looks it up again.
	userTTL = 15 * time.Minute
	// bootstrapWait is how long the first full listing waits for the
	// changefeed's bootstrap, so that it covers the changes made before
	// the registration and need not be repeated.
	bootstrapWait = 3 * time.Second
)

// ServeFullPollInterval is the full listing period for a configured
// full_poll_interval: zero (absent) is the default, and anything below
// MinFullPollInterval is raised to it.
func ServeFullPollInterval(configured time.Duration) time.Duration {
	return max(configured, MinFullPollInterval)
}

// Config configures a Feed. Zero durations take the defaults above.
type Config struct {
	Endpoints

	// FullPollInterval is the period of the full listing (VMs, CNs,
	// networks, owners) while the changefeed is connected;
	// FallbackPollInterval while it is not.
	FullPollInterval     time.Duration
	FallbackPollInterval time.Duration
	// ReaperInterval: a VM seen destroyed is forgotten (RemoveVM) after
	// one to two periods, or at the next full listing.
	ReaperInterval time.Duration
	CNAPIInterval  time.Duration
	NAPIInterval   time.Duration
	// UFDSInterval is the period of the changelog check.
	UFDSInterval time.Duration
	// PingInterval and PongTimeout are the changefeed's liveness check: a
	// WebSocket ping that often, and the connection given up after that
	// long without a pong or an item.
	PingInterval, PongTimeout time.Duration
	// RequestTimeout bounds one request to any service.
	RequestTimeout time.Duration
	// RetryMin and RetryMax bound the backoff of every retry; the
	// changefeed reconnects within min(RetryMax, 10 s), as the reference.
	RetryMin, RetryMax time.Duration
	// Workers is how many changed VMs are fetched at once.
	Workers int

	HTTPClient *http.Client
	Logger     *slog.Logger
	Now        func() time.Time
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.FullPollInterval, DefaultFullPollInterval)
	def(&c.FallbackPollInterval, DefaultFallbackPollInterval)
	def(&c.ReaperInterval, DefaultReaperInterval)
	def(&c.CNAPIInterval, DefaultCNAPIInterval)
	def(&c.NAPIInterval, DefaultNAPIInterval)
	def(&c.UFDSInterval, DefaultUFDSInterval)
	def(&c.PingInterval, DefaultPingInterval)
	def(&c.PongTimeout, DefaultPongTimeout)
	def(&c.RequestTimeout, DefaultRequestTimeout)
	def(&c.RetryMin, DefaultRetryMin)
	def(&c.RetryMax, DefaultRetryMax)
	if c.RetryMax < c.RetryMin {
		c.RetryMax = c.RetryMin
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.HTTPClient == nil {
		c.HTTPClient = newHTTPClient()
	}
}

// Feed keeps a dc.Sink in step with a Triton data center: a full listing at
// start, after every changefeed (re)bootstrap and periodically; every
// changefeed item applied within a round trip; CNAPI, NAPI and the UFDS
// changelog polled. A failure of any service is reported and retried
// with backoff and never removes anything: only a successful, complete
// listing or VMAPI's word about one VM does.
type Feed struct {
	cfg  Config
	sink dc.Sink
	log  *slog.Logger
	now  func() time.Time

	vmapi *VMAPI
	cnapi *CNAPI
	napi  *NAPI
	ufds  *UFDS
	cf    *Changefeed

	relist     chan struct{} // a full listing is due
	napiNow    chan struct{} // a VM names a network the last NAPI listing lacked
	cnapiNow   chan struct{} // a VM changed state: its CN may have rebooted
	wake       chan struct{} // an event is ready for a worker
	bootstrap  chan struct{} // closed at the first changefeed bootstrap
	synced     chan struct{} // closed when the first full listing is applied
	bootOnce   sync.Once
	syncedOnce sync.Once

	// sinkMu serialises every write to the sink, so that a full listing
	// and the changes that overtook it land in order; it is taken before
	// mu, never inside it.
	sinkMu  sync.Mutex
	listing bool
	recent  map[string]*dc.VM // VMs applied (nil: removed) from changes since the listing began

	mu        sync.Mutex
	pending   map[string]*pendingVM
	ready     []string
	inflight  map[string]bool
	applied   map[string]appliedVM
	destroyed map[string]time.Time
	cfUp      bool
	users     map[string]cachedUser // by uuid, lower case
	missing   map[string]bool       // owners whose lookup failed
	adminUUID string
	// changelogStart is the UFDS change number read before the first
	// listing looked owners up (-1 until then).
	changelogStart int64
	servers        map[string]dc.Server // the last CNAPI listing, by uuid
	haveCNAPI      bool
	haveNAPI       bool
	nets           []dc.Network // the last NAPI listing
	pools          []dc.NetworkPool
	networks       map[string]bool // its network uuids
	status         Status
}

// Status describes what the feed has done, for tests and operators.
type Status struct {
	FullSyncs        int
	LastFullSync     time.Time
	LastFullSyncTook time.Duration
	LastFullSyncVMs  int
	ChangefeedUp     bool
	Changes          int // change items received
	Applied          int // VM states applied from changes
	Pending          int // VMs waiting to be fetched or retried
}

type pendingVM struct {
	change   *Change // the latest resourceObject seen, or nil
	attempts int
	queued   bool
	retrying bool
}

// appliedVM is the last state of a VM applied from a change: its
// last_modified and a hash of the object, to tell a stale or repeated
// resourceObject from a new one.
type appliedVM struct {
	modified time.Time
	hash     uint64
	at       time.Time
}

type cachedUser struct {
	user    dc.User
	fetched time.Time
}

// NewFeed returns a feed for cfg driving sink; Run starts it.
func NewFeed(cfg Config, sink dc.Sink) (*Feed, error) {
	cfg.setDefaults()
	f := &Feed{
		cfg: cfg, sink: sink, log: cfg.Logger, now: cfg.Now,
		relist: make(chan struct{}, 1), napiNow: make(chan struct{}, 1), cnapiNow: make(chan struct{}, 1),
		wake:      make(chan struct{}, 1),
		bootstrap: make(chan struct{}), synced: make(chan struct{}),
		pending: map[string]*pendingVM{}, inflight: map[string]bool{}, applied: map[string]appliedVM{},
		destroyed: map[string]time.Time{}, users: map[string]cachedUser{}, missing: map[string]bool{},
		servers: map[string]dc.Server{}, networks: map[string]bool{}, changelogStart: -1,
	}
	var err error
	hc, to := cfg.HTTPClient, cfg.RequestTimeout
	if f.vmapi, err = NewVMAPI(cfg.VMAPI, hc, to); err != nil {
		return nil, err
	}
	if f.cnapi, err = NewCNAPI(cfg.CNAPI, hc, to); err != nil {
		return nil, err
	}
	if f.napi, err = NewNAPI(cfg.NAPI, hc, to); err != nil {
		return nil, err
	}
	if f.ufds, err = NewUFDS(cfg.UFDS, to); err != nil {
		return nil, err
	}
	if f.cf, err = NewChangefeed(cfg.VMAPI, cfg.Changefeed, hc, to); err != nil {
		return nil, err
	}
	f.cf.PingInterval, f.cf.PongTimeout = cfg.PingInterval, cfg.PongTimeout
	f.cf.RetryMin = min(cfg.RetryMin, DefaultReconnectMax)
	f.cf.RetryMax = min(cfg.RetryMax, DefaultReconnectMax)
	f.cf.Logger = cfg.Logger
	return f, nil
}

// Status returns a snapshot of what the feed has done.
func (f *Feed) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.status
	st.ChangefeedUp = f.cfUp
	st.Pending = len(f.pending)
	return st
}

// Run drives the sink until ctx ends.
func (f *Feed) Run(ctx context.Context) error {
	defer f.ufds.Close()
	events := make(chan ChangefeedEvent, 1024)
	var wg sync.WaitGroup
	wg.Go(func() { f.cf.Run(ctx, events) })
	wg.Go(func() { f.watchChangefeed(ctx, events) })
	wg.Go(func() { f.lister(ctx) })
	for range f.cfg.Workers {
		wg.Go(func() { f.worker(ctx) })
	}
	wg.Go(func() {
		// The pollers start from the state the first listing applied.
		select {
		case <-f.synced:
		case <-ctx.Done():
			return
		}
		var pw sync.WaitGroup
		pw.Go(func() { f.pollCNAPI(ctx) })
		pw.Go(func() { f.pollNAPI(ctx) })
		pw.Go(func() { f.watchUFDS(ctx) })
		pw.Go(func() { f.reaper(ctx) })
		pw.Wait()
	})
	wg.Wait()
	return ctx.Err()
}

// ---- changefeed ----

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

func (f *Feed) requestRelist() {
	select {
	case f.relist <- struct{}{}:
	default:
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// enqueue records a change; changes to one VM coalesce, so a burst of
// duplicates costs one fetch.
func (f *Feed) enqueue(ch *Change) {
	id := strings.ToLower(ch.UUID)
	if !dc.IsUUID(id) {
		return
	}
	if slices.Contains(ch.SubResources, "state") {
		// A CN reboot shows first as its VMs changing state: look at the
		// CNs now rather than at the next poll, so that the VMs coming back
		// on a CN booted minutes ago stay out of services (the CN-down
		// rule) instead of flapping in and out.
		signal(f.cnapiNow)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status.Changes++
	p := f.pending[id]
	if p == nil {
		p = &pendingVM{}
		f.pending[id] = p
	}
	if ch.Object != nil {
		// Keep the newest object; two that cannot be ordered mean a fetch.
		if p.change == nil || newer(ch.Object, p.change.Object) {
			p.change = ch
		} else if !newer(p.change.Object, ch.Object) && !sameRaw(p.change, ch) {
			p.change = nil
		}
	}
	if !p.queued && !p.retrying && !f.inflight[id] {
		p.queued = true
		f.ready = append(f.ready, id)
		signal(f.wake)
	}
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
		id, p, ok := f.take()
		if !ok {
			select {
			case <-f.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		err := f.process(ctx, id, p)
		f.finish(id, p, err)
		if ctx.Err() != nil {
			return
		}
	}
}

func (f *Feed) take() (string, *pendingVM, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.ready) > 0 {
		id := f.ready[0]
		f.ready = f.ready[1:]
		p := f.pending[id]
		if p == nil || !p.queued {
			continue
		}
		delete(f.pending, id)
		p.queued = false
		f.inflight[id] = true
		if len(f.ready) > 0 {
			signal(f.wake) // more for another worker
		}
		return id, p, true
	}
	f.ready = nil
	return "", nil, false
}

// finish settles a processed VM: a failure is queued again after a
// backoff (never dropped), and a change that arrived meanwhile is queued.
func (f *Feed) finish(id string, p *pendingVM, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.inflight, id)
	next := f.pending[id]
	if err != nil {
		if next == nil {
			next = p
			f.pending[id] = p
		}
		next.attempts = p.attempts + 1
		next.queued = false
		next.retrying = true
		b := backoff{min: f.cfg.RetryMin, max: f.cfg.RetryMax}
		var delay time.Duration
		for range min(next.attempts, 16) {
			delay = b.next()
		}
		time.AfterFunc(delay, func() { f.requeue(id) })
		return
	}
	if next != nil && !next.queued && !next.retrying {
		next.queued = true
		f.ready = append(f.ready, id)
		signal(f.wake)
	}
}

func (f *Feed) requeue(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pending[id]
	if p == nil || !p.retrying {
		return
	}
	p.retrying = false
	if !f.inflight[id] && !p.queued {
		p.queued = true
		f.ready = append(f.ready, id)
		signal(f.wake)
	}
}

// process brings one changed VM up to date: from the change's
// resourceObject when it is provably newer than what was applied, else
// from GET /vms/:uuid. A VM VMAPI does not know is removed only once a
// listing by uuid confirms it.
func (f *Feed) process(ctx context.Context, id string, p *pendingVM) error {
	if ch := p.change; ch != nil {
		switch f.judge(id, ch) {
		case objStale:
			return nil
		case objApply:
			f.ensureOwner(ctx, ch.Object.OwnerUUID)
			f.applyVM(id, ch.Object, hashRaw(ch.Raw), "changefeed")
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
			f.sinkMu.Lock()
			if f.listing {
				f.recent[id] = nil // a page listed before must not bring it back
			}
			f.sink.RemoveVM(id, "VM unknown to VMAPI")
			f.sinkMu.Unlock()
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
	f.ensureOwner(ctx, vm.OwnerUUID)
	f.applyVM(id, vm, 0, "changefeed")
	return nil
}

type judgement int

const (
	objFetch judgement = iota
	objApply
	objStale
)

// judge decides what a resourceObject is worth: applied when its
// last_modified is after that of the state last applied, ignored when
// before or when it is that very state again, fetched when that cannot
// be told (the publisher may reorder and repeat items).
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
	case t.Before(prev.modified):
		return objStale
	case prev.hash != 0 && prev.hash == hashRaw(ch.Raw):
		return objStale
	}
	return objFetch
}

// applyVM hands one VM's current state to the sink.
func (f *Feed) applyVM(id string, vm *dc.VM, hash uint64, cause string) {
	f.sinkMu.Lock()
	if f.listing {
		f.recent[id] = vm
	}
	f.sink.SetVM(vm, cause)
	f.sinkMu.Unlock()

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
	unknownNet := false
	if f.haveNAPI {
		for _, n := range vm.NICs {
			if n.NetworkUUID != "" && !f.networks[strings.ToLower(n.NetworkUUID)] {
				unknownNet = true
			}
		}
	}
	f.mu.Unlock()
	if unknownNet {
		signal(f.napiNow)
	}
}

// ---- owners (UFDS) ----

// ensureOwner makes sure the sink knows the owner of a VM about to be
// applied, looking it up when it is not cached. A failed lookup leaves
// the owner to the UFDS watcher's retries; meanwhile the sink keeps the
// owner's VMs as they are.
func (f *Feed) ensureOwner(ctx context.Context, owner string) {
	owner = strings.ToLower(owner)
	if owner == "" {
		return
	}
	f.mu.Lock()
	_, ok := f.users[owner]
	f.mu.Unlock()
	if ok {
		return
	}
	usr, err := f.ufds.GetUser(ctx, owner)
	if err != nil {
		f.mu.Lock()
		f.missing[owner] = true
		f.mu.Unlock()
		if !errors.Is(err, ErrNotFound) {
			f.sink.ReportFeed(HealthUFDS, err)
		}
		return
	}
	f.setUser(*usr, "owner looked up")
}

// setUser caches an account and hands it to the sink when it changed.
func (f *Feed) setUser(usr dc.User, cause string) {
	f.sinkMu.Lock()
	defer f.sinkMu.Unlock()
	f.mu.Lock()
	old, had := f.users[usr.UUID]
	f.users[usr.UUID] = cachedUser{user: usr, fetched: f.now()}
	delete(f.missing, usr.UUID)
	delete(f.missing, strings.ToLower(usr.Login))
	if usr.Login == "admin" {
		f.adminUUID = usr.UUID
	}
	f.mu.Unlock()
	if !had || old.user != usr {
		f.sink.SetUser(usr, cause)
	}
}

// resolveOwners looks up, a few at a time, every owner that is not
// cached or whose cache entry is old, plus the admin account (owner of
// the CN cmon names). It stops at the first failure other than "no such
// account": UFDS is down, and the rest are left to the watcher.
func (f *Feed) resolveOwners(ctx context.Context, owners map[string]bool) error {
	now := f.now()
	var todo []string
	f.mu.Lock()
	for o := range owners {
		if c, ok := f.users[o]; !ok || now.Sub(c.fetched) > userTTL {
			todo = append(todo, o)
		}
	}
	if f.adminUUID == "" {
		todo = append(todo, "admin")
	}
	f.mu.Unlock()
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
	f.mu.Lock()
	for _, usr := range found {
		f.users[usr.UUID] = cachedUser{user: usr, fetched: now}
		delete(f.missing, usr.UUID)
		if usr.Login == "admin" {
			f.adminUUID = usr.UUID
		}
	}
	for _, o := range todo {
		if _, ok := f.users[o]; !ok && o != "admin" {
			f.missing[o] = true
		}
	}
	f.mu.Unlock()
	return failed
}

// ---- the full listing ----

// lister runs the full listings: the first once the changefeed has
// bootstrapped (or after a short wait for it), then after every
// bootstrap, and periodically (more often while the changefeed is down).
func (f *Feed) lister(ctx context.Context) {
	t := time.NewTimer(bootstrapWait)
	select {
	case <-f.bootstrap:
	case <-t.C:
	case <-ctx.Done():
		return
	}
	t.Stop()
	b := backoff{min: f.cfg.RetryMin, max: f.cfg.RetryMax}
	due := true
	var last time.Time
	for {
		if !due {
			f.mu.Lock()
			interval := f.cfg.FallbackPollInterval
			if f.cfUp {
				interval = f.cfg.FullPollInterval
			}
			f.mu.Unlock()
			wait := time.Until(last.Add(interval))
			if wait <= 0 {
				due = true
				continue
			}
			t := time.NewTimer(min(wait, time.Second))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-f.relist:
				due = true
			case <-t.C:
			}
			t.Stop()
			continue
		}
		// A request made before this listing starts is covered by it.
		select {
		case <-f.relist:
		default:
		}
		start := time.Now()
		err := f.fullSync(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			delay := b.next()
			f.log.Warn("full listing failed; keeping what is stored", "err", err, "retry_in", delay.String())
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			continue
		}
		b.reset()
		due, last = false, start
	}
}

// fullSync lists everything and applies it as one complete inventory. A
// listing that failed anywhere is not applied. CNAPI and NAPI failures
// fall back on their last good answer; with none yet, the listing fails,
// since without them records would land in the wrong zones. Owners UFDS
// cannot give stay unknown, which makes the sink keep their VMs' records.
func (f *Feed) fullSync(ctx context.Context) error {
	start := time.Now()
	f.sinkMu.Lock()
	f.listing, f.recent = true, map[string]*dc.VM{}
	f.sinkMu.Unlock()
	applied := false
	defer func() {
		if !applied {
			f.sinkMu.Lock()
			f.listing, f.recent = false, nil
			f.sinkMu.Unlock()
		}
	}()

	servers, err := f.cnapi.ListServers(ctx)
	f.sink.ReportFeed(HealthCNAPI, err)
	if err != nil {
		f.mu.Lock()
		known := f.haveCNAPI
		servers = slices.Collect(maps.Values(f.servers))
		f.mu.Unlock()
		if !known {
			return fmt.Errorf("no compute node listing yet: %w", err)
		}
	}
	nets, pools, err := f.listNetworks(ctx)
	f.sink.ReportFeed(HealthNAPI, err)
	if err != nil {
		f.mu.Lock()
		known := f.haveNAPI
		nets, pools = f.nets, f.pools
		f.mu.Unlock()
		if !known {
			return fmt.Errorf("no network listing yet: %w", err)
		}
	}
	listStart := time.Now()
	vms, err := f.vmapi.ListAllVMs(ctx, VMFilter{State: "active"})
	f.sink.ReportFeed(HealthVMAPI, err)
	if err != nil {
		return err
	}
	listTook := time.Since(listStart)
	owners := map[string]bool{}
	for i := range vms {
		if o := strings.ToLower(vms[i].OwnerUUID); o != "" {
			owners[o] = true
		}
	}
	f.mu.Lock()
	first := f.changelogStart < 0
	f.mu.Unlock()
	if first {
		// Changes after this point reach the watcher, even those made
		// between the lookups below and its first look.
		if n, err := f.ufds.LatestChangeNumber(ctx); err == nil {
			f.mu.Lock()
			f.changelogStart = n
			f.mu.Unlock()
		}
	}
	ownersStart := time.Now()
	if err := f.resolveOwners(ctx, owners); err != nil {
		f.sink.ReportFeed(HealthUFDS, err)
		f.log.Warn("owner lookups failed; their VMs keep their records until UFDS answers", "err", err)
	}

	ownersTook := time.Since(ownersStart)
	f.sinkMu.Lock()
	f.mu.Lock()
	admin := f.adminUUID
	f.mu.Unlock()
	all := mergeRecent(append(vms, CNVMs(servers, admin)...), f.recent)
	f.listing, f.recent = false, nil
	clear(owners)
	for i := range all {
		owners[strings.ToLower(all[i].OwnerUUID)] = true
	}
	inv := &dc.Inventory{VMs: all, Servers: servers, Networks: nets, NetworkPools: pools}
	f.mu.Lock()
	for o, c := range f.users {
		if owners[o] || o == admin {
			inv.Users = append(inv.Users, c.user)
		} else {
			delete(f.users, o) // owns nothing any more
		}
	}
	f.mu.Unlock()
	f.sink.SetInventory(inv, "vmapi full listing")
	applied = true
	f.sinkMu.Unlock()

	f.mu.Lock()
	f.servers = map[string]dc.Server{}
	for _, s := range servers {
		f.servers[strings.ToLower(s.UUID)] = s
	}
	f.haveCNAPI = true
	f.setNetworkSet(nets, pools)
	listed := make(map[string]bool, len(inv.VMs))
	for i := range inv.VMs {
		listed[strings.ToLower(inv.VMs[i].UUID)] = true
	}
	for id := range f.destroyed {
		if !listed[id] {
			delete(f.destroyed, id)
		}
	}
	f.status.FullSyncs++
	f.status.LastFullSync = f.now()
	f.status.LastFullSyncTook = time.Since(start)
	f.status.LastFullSyncVMs = len(vms)
	f.mu.Unlock()
	f.syncedOnce.Do(func() { close(f.synced) })
	f.log.Info("full listing applied", "vms", len(vms), "servers", len(servers), "users", len(inv.Users),
		"took", time.Since(start).String(), "vmapi_took", listTook.String(), "ufds_took", ownersTook.String())
	return nil
}

// mergeRecent puts into a listing the VMs that changes applied while it
// ran, unless the listing's copy is newer, and takes out those removed
// meanwhile: a page fetched before a change must not undo it.
func mergeRecent(vms []dc.VM, recent map[string]*dc.VM) []dc.VM {
	if len(recent) == 0 {
		return vms
	}
	idx := make(map[string]int, len(recent))
	for i := range vms {
		if id := strings.ToLower(vms[i].UUID); hasKey(recent, id) {
			idx[id] = i
		}
	}
	gone := map[int]bool{}
	for id, vm := range recent {
		i, listed := idx[id]
		switch {
		case vm == nil:
			if listed {
				gone[i] = true
			}
		case !listed:
			vms = append(vms, *vm)
		case !newer(&vms[i], vm):
			vms[i] = *vm
		}
	}
	if len(gone) == 0 {
		return vms
	}
	out := vms[:0]
	for i := range vms {
		if !gone[i] {
			out = append(out, vms[i])
		}
	}
	return out
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

// ---- compute nodes (CNAPI) ----

// CNVMs returns the reference's fake VMs for compute nodes (TRITON-359): one
// per CN, owned by the admin account, with the CN's hostname as its
// smartdc_role and one admin NIC. Record generation strips the admin NIC,
// leaving exactly the <server_uuid>.cmon names CMON looks CNs up by.
// Without an admin account there are none, as in the reference.
func CNVMs(servers []dc.Server, adminUUID string) []dc.VM {
	if adminUUID == "" {
		return nil
	}
	out := make([]dc.VM, 0, len(servers))
	for _, s := range servers {
		if !dc.IsUUID(s.UUID) {
			continue
		}
		role := s.Hostname
		if role == "" {
			role = strings.ToLower(s.UUID)
		}
		vlan := 0
		vm := dc.VM{
			UUID: strings.ToLower(s.UUID), OwnerUUID: adminUUID, State: "running",
			Tags:             map[string]any{"smartdc_role": role},
			CustomerMetadata: map[string]any{},
			NICs:             []dc.NIC{{Interface: "net0", NICTag: s.AdminNICTag(), VLANID: &vlan, IP: "192.0.2.1"}},
		}
		if s.Hostname != "" {
			alias := s.Hostname
			vm.Alias = &alias
		}
		out = append(out, vm)
	}
	return out
}

// pollCNAPI refreshes the compute nodes, periodically and soon after a
// VM changed state (at most every cnapiMinGap). A CN that rebooted or
// changed its down state gets its VMs listed again (the reference's
// targeted poll), since their state moved while the CN was away.
func (f *Feed) pollCNAPI(ctx context.Context) {
	b := backoff{min: f.cfg.RetryMin, max: f.cfg.RetryMax}
	wait := f.cfg.CNAPIInterval
	for {
		if !sleepUnless(ctx, wait, f.cnapiNow) {
			return
		}
		servers, err := f.cnapi.ListServers(ctx)
		f.sink.ReportFeed(HealthCNAPI, err)
		if err != nil {
			wait = min(b.next(), f.cfg.CNAPIInterval)
			continue
		}
		b.reset()
		wait = f.cfg.CNAPIInterval
		for _, s := range f.applyServers(servers) {
			f.resyncServer(ctx, s)
		}
		// A burst of state changes (a CN rebooting) asks once per gap.
		if !sleep(ctx, min(cnapiMinGap, f.cfg.CNAPIInterval)) {
			return
		}
	}
}

// applyServers hands a CNAPI listing to the sink, with the CN cmon VMs
// that follow from it, and returns the CNs whose VMs need a fresh look.
func (f *Feed) applyServers(servers []dc.Server) []string {
	now := f.now()
	f.sinkMu.Lock()
	defer f.sinkMu.Unlock()
	f.mu.Lock()
	old := f.servers
	f.servers = make(map[string]dc.Server, len(servers))
	var moved []string
	for _, s := range servers {
		id := strings.ToLower(s.UUID)
		f.servers[id] = s
		if prev, ok := old[id]; ok && (prev.LastBoot != s.LastBoot || dc.ServerState(&prev, now) != dc.ServerState(&s, now)) {
			moved = append(moved, id)
		}
	}
	admin := f.adminUUID
	f.mu.Unlock()
	f.sink.SetServers(servers, "compute nodes polled")
	for _, vm := range CNVMs(servers, admin) {
		f.sink.SetVM(&vm, "compute nodes polled")
	}
	if admin != "" {
		for id := range old {
			if _, ok := f.servers[id]; !ok {
				f.sink.RemoveVM(id, "compute node removed")
			}
		}
	}
	return moved
}

// resyncServer lists the VMs of one CN and applies each.
func (f *Feed) resyncServer(ctx context.Context, server string) {
	vms, err := f.vmapi.ListAllVMs(ctx, VMFilter{State: "active", ServerUUID: server})
	if err != nil {
		f.sink.ReportFeed(HealthVMAPI, err)
		f.requestRelist() // the periodic listing would be too late
		return
	}
	f.log.Info("compute node changed; its VMs listed again", "server", server, "vms", len(vms))
	for i := range vms {
		f.ensureOwner(ctx, vms[i].OwnerUUID)
		f.applyVM(strings.ToLower(vms[i].UUID), &vms[i], 0, "compute node changed")
	}
}

// ---- networks (NAPI) ----

func (f *Feed) listNetworks(ctx context.Context) ([]dc.Network, []dc.NetworkPool, error) {
	nets, err := f.napi.ListNetworks(ctx)
	if err != nil {
		return nil, nil, err
	}
	pools, err := f.napi.ListNetworkPools(ctx)
	if err != nil {
		return nil, nil, err
	}
	return nets, pools, nil
}

func (f *Feed) setNetworkSet(nets []dc.Network, pools []dc.NetworkPool) {
	f.nets, f.pools = nets, pools
	f.networks = make(map[string]bool, len(nets))
	for _, n := range nets {
		f.networks[strings.ToLower(n.UUID)] = true
	}
	f.haveNAPI = true
}

// pollNAPI refreshes networks and pools periodically, and soon after a
// VM names a network the last listing lacked.
func (f *Feed) pollNAPI(ctx context.Context) {
	b := backoff{min: f.cfg.RetryMin, max: f.cfg.RetryMax}
	wait := f.cfg.NAPIInterval
	for {
		if !sleepUnless(ctx, wait, f.napiNow) {
			return
		}
		nets, pools, err := f.listNetworks(ctx)
		f.sink.ReportFeed(HealthNAPI, err)
		if err != nil {
			wait = min(b.next(), f.cfg.NAPIInterval)
			continue
		}
		b.reset()
		wait = f.cfg.NAPIInterval
		f.sinkMu.Lock()
		f.mu.Lock()
		f.setNetworkSet(nets, pools)
		f.mu.Unlock()
		f.sink.SetNetworks(nets, pools, "networks polled")
		f.sinkMu.Unlock()
		// A burst of VMs on a new network asks once.
		if !sleep(ctx, f.cfg.RetryMin) {
			return
		}
		select {
		case <-f.napiNow:
		default:
		}
	}
}

// ---- UFDS changelog ----

// watchUFDS follows the UFDS changelog: an account whose flags or login
// changed is looked up again and handed to the sink, within one check
// period. It also retries the owners whose lookup failed.
func (f *Feed) watchUFDS(ctx context.Context) {
	f.mu.Lock()
	last := f.changelogStart // where the changelog stood before the first listing's lookups
	f.mu.Unlock()
	refresh := map[string]bool{}
	b := backoff{min: f.cfg.RetryMin, max: f.cfg.RetryMax}
	var retryAt time.Time
	for {
		if !sleep(ctx, f.cfg.UFDSInterval) {
			return
		}
		err := f.readChangelog(ctx, &last, refresh)
		f.mu.Lock()
		for o := range f.missing {
			if f.now().After(retryAt) {
				refresh[o] = true
			}
		}
		f.mu.Unlock()
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
		f.mu.Lock()
		for o := range f.users {
			refresh[o] = true
		}
		f.mu.Unlock()
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
		f.mu.Lock()
		for i := range entries {
			e := &entries[i]
			id, ok := e.AccountUUID()
			_, cached := f.users[id]
			if ok && (cached || f.missing[id]) &&
				(e.ChangeType == "add" || e.Touches(flagAttrs...)) {
				refresh[id] = true
			}
		}
		f.mu.Unlock()
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
			f.mu.Lock()
			delete(f.missing, id) // looked up again by the next full listing
			f.mu.Unlock()
		default:
			return err
		}
		delete(refresh, id)
	}
	return nil
}

// ---- reaper ----

// reaper forgets VMs seen destroyed at least one period ago, and the
// change bookkeeping of VMs that have been quiet for as long.
func (f *Feed) reaper(ctx context.Context) {
	for {
		if !sleep(ctx, f.cfg.ReaperInterval) {
			return
		}
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
			continue
		}
		f.sinkMu.Lock()
		for _, id := range gone {
			f.sink.RemoveVM(id, "destroyed VM reaped")
		}
		f.sinkMu.Unlock()
		f.log.Info("destroyed VMs reaped", "vms", len(gone))
	}
}
