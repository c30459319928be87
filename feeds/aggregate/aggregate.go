// Package aggregate follows other cns zones as a secondary would and makes
// region zones of them (RFD 172 "CNS aggregation"): every source zone's
// names under the region's suffix, the same name from several data
// centers merged. Each source name becomes a pseudo-VM of the updater, so
// the store's candidate machinery merges and caps the RRsets, and the
// region zone is an ordinary cns zone (serials, journal, IXFR, NOTIFY).
package aggregate

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
)

// Region is one region zone and the zones it is made of.
type Region struct {
	Zone    string // lower case, no trailing dot
	Sources []Source
}

// Source is one zone followed.
type Source struct {
	Zone      string   // lower case, no trailing dot
	Primaries []string // ip:port, tried in order
	Key       *Key     // TSIG for queries, transfers and NOTIFY; nil: none
}

// Key is a TSIG key (name and algorithm fqdn, secret base64).
type Key struct {
	Name, Algorithm, Secret string
}

// Sink is where batches go: the updater.
type Sink interface {
	SetSource(feeds.SourceBatch)
	ReportFeed(name string, err error)
}

// Options configure an Aggregator.
type Options struct {
	Regions []Region
	Store   *db.DB
	Sink    Sink
	Logger  *slog.Logger
	// Timeout bounds one query or transfer step (default 10 s).
	Timeout time.Duration
	// MaxRecords rejects a larger transfer (default 10,000,000).
	MaxRecords int
	// MaxRefresh, MaxRetry and MaxExpire, when set, cap the source SOA's
	// timers (tests shorten them; the source's own values otherwise).
	MaxRefresh, MaxRetry, MaxExpire time.Duration
}

// Aggregator follows every source of every region.
type Aggregator struct {
	opts    Options
	log     *slog.Logger
	sources []*follower
}

// New builds a follower for every configured source. It reads nothing:
// serve's NOTIFY hook (Notified) may be called from the moment New
// returns, and a restart's first answers must not wait for a region's
// copies. Load reads them before Run.
func New(o Options) *Aggregator {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxRecords == 0 {
		o.MaxRecords = 10_000_000
	}
	a := &Aggregator{opts: o, log: o.Logger}
	for _, r := range o.Regions {
		for _, s := range r.Sources {
			a.sources = append(a.sources, newFollower(a, r.Zone, s))
		}
	}
	return a
}

// Load reads the stored copies, so that the sources resume with IXFR, and
// makes the records of sources no longer configured leave. Call it once,
// before Run.
func (a *Aggregator) Load() error {
	stored, err := a.opts.Store.Sources()
	if err != nil {
		return err
	}
	for _, f := range a.sources {
		if st, ok := stored[f.key]; ok {
			if err := f.load(st); err != nil {
				return err
			}
		}
		delete(stored, f.key)
	}
	for key := range stored {
		if err := a.forget(key); err != nil {
			return err
		}
	}
	return nil
}

// forget removes a source that left the configuration.
func (a *Aggregator) forget(key string) error {
	var vms []db.VMChange
	err := a.opts.Store.ScanSource(key, func(name string, _ []byte) error {
		vms = append(vms, db.VMChange{UUID: pseudoUUID(key, name), Delete: true})
		return nil
	})
	if err != nil {
		return err
	}
	a.log.Info("aggregated source no longer configured; its records leave", "source", key, "names", len(vms))
	b := feeds.SourceBatch{Source: db.SourceUpdate{Source: key, Forget: true}, Cause: "aggregate: source " + key + " removed"}
	b.N, b.VM = feeds.SourceVMs(sortVMs(vms))
	a.opts.Sink.SetSource(b)
	return nil
}

// Run follows every source until ctx ends.
func (a *Aggregator) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, f := range a.sources {
		wg.Go(func() { f.run(ctx) })
	}
	wg.Wait()
	return ctx.Err()
}

// Notified is serve's hook for an incoming NOTIFY: it reports whether a
// followed source has that zone and lists the sender among its primaries
// (with the source's key, when it names one), and if so checks it now.
func (a *Aggregator) Notified(zone string, from netip.Addr, key string) bool {
	zone = strings.ToLower(strings.TrimSuffix(zone, "."))
	ok := false
	for _, f := range a.sources {
		if f.src.Zone != zone || !f.isPrimary(from) {
			continue
		}
		if f.src.Key != nil && !strings.EqualFold(strings.TrimSuffix(key, "."), strings.TrimSuffix(f.src.Key.Name, ".")) {
			continue
		}
		ok = true
		select {
		case f.poke <- struct{}{}:
		default:
		}
	}
	return ok
}

// Status returns every source's state as operators see it, sorted by
// region and zone.
func (a *Aggregator) Status() []status.AggregateSource {
	out := make([]status.AggregateSource, 0, len(a.sources))
	for _, f := range a.sources {
		out = append(out, f.status())
	}
	slices.SortFunc(out, func(x, y status.AggregateSource) int {
		if c := strings.Compare(x.Region, y.Region); c != 0 {
			return c
		}
		return strings.Compare(x.Zone, y.Zone)
	})
	return out
}
