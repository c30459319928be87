package aggregate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
)

// state is what is stored of a source besides its names.
type state struct {
	Serial       uint32    `json:"serial"`
	Refresh      uint32    `json:"refresh"`
	Retry        uint32    `json:"retry"`
	Expire       uint32    `json:"expire"`
	LastTransfer time.Time `json:"last_transfer"`
	LastCheck    time.Time `json:"last_check"`
}

// checkPersistEvery is how stale the stored LastCheck may get: a restart
// counts the expire time from it.
const checkPersistEvery = 10 * time.Minute

// follower follows one source zone for one region.
type follower struct {
	a      *Aggregator
	region string
	src    Source
	key    string // the store's and the pseudo-VMs' key: region/zone
	rn     rename
	cl     client
	addrs  []netip.Addr
	poke   chan struct{}

	mu       sync.Mutex
	have     bool // a copy exists (stored or transferred)
	st       state
	saved    time.Time // LastCheck as stored
	copy     names
	err      error
	expired  bool
	skipped  int
	lastKind string // "IXFR" or "AXFR": how the last transfer came
}

func newFollower(a *Aggregator, region string, s Source) *follower {
	f := &follower{a: a, region: region, src: s, key: region + "/" + s.Zone, poke: make(chan struct{}, 1), copy: names{},
		rn: rename{region: dns.Fqdn(region), source: dns.Fqdn(s.Zone)},
		cl: client{zone: dns.Fqdn(s.Zone), key: s.Key, timeout: a.opts.Timeout, maxRRs: a.opts.MaxRecords}}
	for _, p := range s.Primaries {
		if ap, err := netip.ParseAddrPort(p); err == nil {
			f.addrs = append(f.addrs, ap.Addr().Unmap())
		}
	}
	return f
}

func (f *follower) feedName() string { return "aggregate " + f.src.Zone }

func (f *follower) isPrimary(from netip.Addr) bool {
	for _, a := range f.addrs {
		if a == from.Unmap() {
			return true
		}
	}
	return false
}

// load reads the stored state and copy.
func (f *follower) load(st []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := json.Unmarshal(st, &f.st); err != nil {
		return fmt.Errorf("aggregate source %s: stored state: %w", f.key, err)
	}
	f.have, f.saved = true, f.st.LastCheck
	return f.a.opts.Store.ScanSource(f.key, func(name string, v []byte) error {
		f.copy[name] = bytes.Clone(v)
		return nil
	})
}

func (f *follower) timer(v uint32, limit time.Duration, def time.Duration) time.Duration {
	d := time.Duration(v) * time.Second
	if d == 0 {
		d = def
	}
	if limit > 0 && d > limit {
		d = limit
	}
	return d
}

// run checks the source on its refresh timer (retry after a failure) or
// when it NOTIFYs, and drops its records once expire has passed without
// an answer.
func (f *follower) run(ctx context.Context) {
	o := f.a.opts
	for {
		err := f.sync()
		f.mu.Lock()
		f.err = err
		wait := f.timer(f.st.Refresh, o.MaxRefresh, time.Hour)
		if err != nil {
			wait = f.timer(f.st.Retry, o.MaxRetry, time.Minute)
			if f.have {
				left := time.Until(f.st.LastCheck.Add(f.timer(f.st.Expire, o.MaxExpire, 7*24*time.Hour)))
				if left <= 0 {
					f.expire(err)
				} else {
					wait = min(wait, left)
				}
			}
		}
		f.mu.Unlock()
		f.a.opts.Sink.ReportFeed(f.feedName(), err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-f.poke:
		case <-t.C:
		}
		t.Stop()
	}
}

// sync brings the copy to the source's serial, trying the primaries in
// order.
func (f *follower) sync() error {
	var errs []error
	for _, p := range f.src.Primaries {
		err := f.syncFrom(p)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", p, err))
	}
	return errors.Join(errs...)
}

func (f *follower) syncFrom(primary string) error {
	soa, err := f.cl.soa(primary)
	if err != nil {
		return err
	}
	f.mu.Lock()
	have, serial := f.have, f.st.Serial
	f.mu.Unlock()
	if have && !db.SerialLess(serial, soa.Serial) {
		f.checked()
		return nil
	}
	t, err := f.cl.fetch(primary, serial, have)
	if errors.Is(err, errUpToDate) {
		f.checked()
		return nil
	}
	if err != nil {
		f.a.log.Warn("aggregate: transfer rejected; the last good copy stays", "source", f.src.Zone, "primary", primary, "err", err)
		return err
	}
	return f.apply(t, primary)
}

// checked notes that the source is at the copy's serial.
func (f *follower) checked() {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	f.st.LastCheck, f.expired = now, false
	if now.Sub(f.saved) < checkPersistEvery {
		return
	}
	f.saved = now
	st, _ := json.Marshal(f.st)
	f.a.opts.Sink.SetSource(feeds.SourceBatch{Source: db.SourceUpdate{Source: f.key, State: st}, Cause: "aggregate: " + f.src.Zone + " checked"})
}

// apply turns a transfer into the copy's changes and the region's.
func (f *follower) apply(t *transfer, primary string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var changed map[string][]byte
	var err error
	kind := "IXFR"
	if t.full {
		kind = "AXFR"
		changed = f.copy.applyFull(t.zone)
	} else {
		changed, err = f.copy.applyDiffs(t.diffs)
	}
	if err != nil {
		f.a.log.Warn("aggregate: transfer rejected; the last good copy stays", "source", f.src.Zone, "err", err)
		return err
	}
	n, build, problems := f.changes(changed)
	now := time.Now()
	f.st = state{Serial: t.soa.Serial, Refresh: t.soa.Refresh, Retry: t.soa.Retry, Expire: t.soa.Expire, LastTransfer: now, LastCheck: now}
	f.saved = now
	st, _ := json.Marshal(f.st)
	f.copy.apply(changed)
	f.have, f.expired = true, false
	f.lastKind = kind
	for _, p := range problems {
		f.a.log.Warn("aggregate: name skipped", "source", f.src.Zone, "problem", p)
	}
	f.a.opts.Sink.SetSource(feeds.SourceBatch{Source: db.SourceUpdate{Source: f.key, State: st, Names: changed}, N: n, VM: build,
		Cause: fmt.Sprintf("aggregate: %s %s to serial %d", f.src.Zone, kind, t.soa.Serial)})
	f.a.log.Info("aggregate: source transferred", "source", f.src.Zone, "region", f.region, "primary", primary, "kind", kind,
		"serial", t.soa.Serial, "records", t.n, "names_changed", len(changed))
	return nil
}

// nameChange is one changed source name on its way to the region.
type nameChange struct {
	uuid, name string
	v          []byte // the name's records now (nil: gone); never modified
}

// changes are the pseudo-VM changes of the changed names, in UUID order
// (the store's pages fill in order), built by the updater chunk by chunk
// from the names' encoded records. A name too long under the region is
// skipped here and counted. f.mu is held.
func (f *follower) changes(changed map[string][]byte) (n int, build func(int) db.VMChange, problems []string) {
	list := make([]nameChange, 0, len(changed))
	for name, v := range changed {
		fits := f.fits(name)
		wasSkipped := f.copy[name] != nil && !fits
		switch {
		case v == nil && wasSkipped:
			f.skipped--
		case v != nil && !fits && !wasSkipped:
			f.skipped++
		}
		if v != nil && !fits {
			problems = append(problems, fmt.Sprintf("%s: longer than 255 octets under %s", name, f.region))
			v = nil
		}
		list = append(list, nameChange{uuid: pseudoUUID(f.key, name), name: name, v: v})
	}
	slices.SortFunc(list, func(a, b nameChange) int { return strings.Compare(a.uuid, b.uuid) })
	rn, region, key, log := f.rn, f.region, f.key, f.a.log
	return len(list), func(i int) db.VMChange {
		c := list[i]
		if c.v == nil {
			return db.VMChange{UUID: c.uuid, Delete: true}
		}
		recs, ok, err := rn.records(c.name, c.v)
		if err != nil || !ok {
			log.Warn("aggregate: name skipped", "source", key, "name", c.name, "problem", "a name in its records is longer than 255 octets under the region, or they are unreadable", "err", err)
		}
		if len(recs) == 0 || !ok {
			return db.VMChange{UUID: c.uuid, Delete: true}
		}
		vc := db.VMChange{UUID: c.uuid, Meta: pseudoMeta(c.uuid, key, c.name), Records: make([]db.Record, 0, len(recs))}
		for _, rr := range recs {
			vc.Records = append(vc.Records, db.Record{Zone: region, RR: rr})
		}
		return vc
	}, problems
}

func (f *follower) fits(name string) bool {
	_, ok := f.rn.name(name)
	return ok
}

// expire drops the copy: the source has not answered for its SOA's
// expire time. f.mu is held.
func (f *follower) expire(cause error) {
	vms := make([]db.VMChange, 0, len(f.copy))
	for name := range f.copy {
		vms = append(vms, db.VMChange{UUID: pseudoUUID(f.key, name), Delete: true})
	}
	f.a.log.Warn("aggregate: source expired; its records leave the region", "source", f.src.Zone, "region", f.region,
		"names", len(f.copy), "last_check", f.st.LastCheck, "err", cause)
	b := feeds.SourceBatch{Source: db.SourceUpdate{Source: f.key, Forget: true}, Cause: fmt.Sprintf("aggregate: %s expired", f.src.Zone)}
	b.N, b.VM = feeds.SourceVMs(sortVMs(vms))
	f.a.opts.Sink.SetSource(b)
	f.copy, f.have, f.expired, f.skipped = names{}, false, true, 0
	f.st = state{}
}

func (f *follower) status() status.AggregateSource {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := status.AggregateSource{Region: f.region, Zone: f.src.Zone, Serial: f.st.Serial, LastTransfer: f.st.LastTransfer,
		LastCheck: f.st.LastCheck, Names: len(f.copy), Skipped: f.skipped, LastKind: f.lastKind, LagSeconds: -1}
	switch {
	case f.expired:
		s.State = status.SourceExpired
	case !f.have:
		s.State = status.SourceSyncing
	case f.err != nil:
		s.State = status.SourceStale
	default:
		s.State = status.SourceOK
	}
	if f.err != nil {
		s.Error = f.err.Error()
	}
	if !f.st.LastCheck.IsZero() {
		s.LagSeconds = time.Since(f.st.LastCheck).Seconds()
	}
	return s
}

// sortVMs puts changes in UUID order, the order the store's pages fill.
func sortVMs(vms []db.VMChange) []db.VMChange {
	slices.SortFunc(vms, func(a, b db.VMChange) int { return strings.Compare(a.UUID, b.UUID) })
	return vms
}
