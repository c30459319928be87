package sdc

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/tritondatacenter/cns/admin/metrics"
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
	DefaultCNAPIInterval        = time.Minute      // the reference's
	DefaultNAPIInterval         = 10 * time.Minute // the reference's pool refresh
	DefaultUFDSInterval         = 2 * time.Second  // the reference's watcher: 5 s
	DefaultWorkers              = 8
	DefaultRetryMin             = 2 * time.Second
	DefaultRetryMax             = 30 * time.Second
	// cnapiMinGap spaces the CNAPI requests that VM state changes ask for.
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
	cfg      Config
	sink     dc.Sink
	log      *slog.Logger
	now      func() time.Time
	ownsHTTP bool // cfg.HTTPClient is the feed's own: Run closes its idle connections

	clients
	queue    *vmQueue      // changed VMs waiting for a worker
	owners   *ownerCache   // the VMs' owners, from UFDS
	servers  *serverCache  // the compute nodes, from CNAPI
	networks *networkCache // the networks and pools, from NAPI
	lookups  *onDemand     // accounts and networks the API asked about
	wakeups

	// mu guards the rest: what changes applied (for judging the next
	// resourceObject and for the reaper), and the status.
	mu        sync.Mutex
	applied   map[string]appliedVM
	destroyed map[string]time.Time
	cfUp      bool
	status    Status
	delay     metrics.Histogram // changefeed item → the sink (DelayHistogram)
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

// clients are the feed's clients of the SDC services.
type clients struct {
	vmapi *VMAPI
	cnapi *CNAPI
	napi  *NAPI
	ufds  *UFDS
	cf    *Changefeed
}

// wakeups are what the feed's goroutines wait for from one another.
type wakeups struct {
	relist     chan struct{} // a full listing is due
	napiNow    chan struct{} // NAPI failed to give a network a VM names
	cnapiNow   chan struct{} // a VM changed state: its CN may have rebooted
	bootstrap  chan struct{} // closed at the first changefeed bootstrap
	synced     chan struct{} // closed when the first full listing is applied
	bootOnce   sync.Once
	syncedOnce sync.Once
}

// appliedVM is the last state of a VM applied from a change: its
// last_modified and a hash of the object, to tell a stale or repeated
// resourceObject from a new one.
type appliedVM struct {
	modified time.Time
	hash     uint64
	at       time.Time
}

// NewFeed returns a feed for cfg driving sink; Run starts it.
func NewFeed(cfg Config, sink dc.Sink) (*Feed, error) {
	ownsHTTP := cfg.HTTPClient == nil
	cfg.setDefaults()
	f := &Feed{
		cfg: cfg, sink: sink, log: cfg.Logger, now: cfg.Now, ownsHTTP: ownsHTTP,
		queue: newVMQueue(cfg.RetryMin, cfg.RetryMax), owners: newOwnerCache(),
		servers: newServerCache(), networks: newNetworkCache(), lookups: newOnDemand(cfg.Now),
		wakeups: wakeups{relist: make(chan struct{}, 1), napiNow: make(chan struct{}, 1), cnapiNow: make(chan struct{}, 1),
			bootstrap: make(chan struct{}), synced: make(chan struct{})},
		applied: map[string]appliedVM{}, destroyed: map[string]time.Time{},
		delay: metrics.NewHistogram(metrics.LatencyBounds),
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
	changes, pending := f.queue.stats()
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.status
	st.ChangefeedUp = f.cfUp
	st.Changes, st.Pending = changes, pending
	return st
}

// Run drives the sink until ctx ends. Every goroutine and timer it starts
// has ended when it returns.
func (f *Feed) Run(ctx context.Context) error {
	defer f.ufds.Close()
	if f.ownsHTTP {
		defer f.cfg.HTTPClient.CloseIdleConnections()
	}
	defer f.queue.stop() // after the workers (wg.Wait below): no retry timer outlives Run
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
		pw.Go(func() { f.runPoller(ctx, f.cnapiPoller()) })
		pw.Go(func() { f.watchServerChanges(ctx) })
		pw.Go(func() { f.runPoller(ctx, f.napiPoller()) })
		pw.Go(func() { f.watchUFDS(ctx) })
		pw.Go(func() { f.reaper(ctx) })
		pw.Wait()
	})
	wg.Wait()
	return ctx.Err()
}
