package sdc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// lister runs the full listings: the first once the changefeed has
// bootstrapped (or after a short wait for it), then after every
// bootstrap, and periodically (more often while the changefeed is down).
func (f *Feed) lister(ctx context.Context) {
	t := time.NewTimer(bootstrapWait)
	select {
	case <-f.bootstrap:
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return
	}
	t.Stop()
	b := backoff{min: f.cfg.RetryMin, max: f.cfg.RetryMax}
	due := true
	var last time.Time
	for {
		if !due {
			if !f.awaitListing(ctx, last) {
				return
			}
			due = true
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
			if !sleep(ctx, delay) {
				return
			}
			continue
		}
		b.reset()
		due, last = false, start
	}
}

// awaitListing waits until the next full listing is due after the one
// started at last: a period later (the fallback period while the
// changefeed is down, looked at every second), or at once when one is
// requested. It returns false when ctx ended.
func (f *Feed) awaitListing(ctx context.Context, last time.Time) bool {
	for {
		f.mu.Lock()
		interval := f.cfg.FallbackPollInterval
		if f.cfUp {
			interval = f.cfg.FullPollInterval
		}
		f.mu.Unlock()
		wait := time.Until(last.Add(interval))
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(min(wait, time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-f.relist:
			t.Stop()
			return true
		case <-t.C:
		}
	}
}

func (f *Feed) requestRelist() { signal(f.relist) }

// listing is one full listing, before it is applied: its VMs are in the
// sink's listing (vms), added page by page as they come, and what the
// feed needs of them besides is noted as they pass.
type listing struct {
	vms     dc.Listing // the sink's (BeginListing)
	started time.Time  // f.now() then
	servers []dc.Server
	// Of the VMs listed: how many, their owners, the networks their NICs
	// name and the MACs of those that name none (noteNetworks), and those
	// of f.destroyed among them.
	count     int
	owners    map[string]bool
	nets      map[string]bool
	macs      map[string]bool
	destroyed map[string]bool
	netsErr   error         // resolving the NICs' networks (legacyNICs)
	listTook  time.Duration // VMAPI's part
}

// fullSync lists everything and applies it as one complete inventory. A
// listing that failed anywhere is not applied. CNAPI and NAPI failures
// fall back on their last good answer; with none yet, the listing fails,
// since without them records would land in the wrong zones. Owners UFDS
// cannot give stay unknown, which makes the sink keep their VMs' records.
func (f *Feed) fullSync(ctx context.Context) error {
	start := time.Now()
	l, err := f.listAll(ctx)
	if err != nil {
		return err
	}
	ownersStart := time.Now()
	f.lookUpOwners(ctx, l.owners)
	ownersTook := time.Since(ownersStart)
	inv := f.applyListing(l)
	f.noteListing(l, start)
	f.syncedOnce.Do(func() { close(f.synced) })
	f.log.Info("full listing applied", "vms", l.count, "servers", len(l.servers), "users", len(inv.Users),
		"took", time.Since(start).String(), "vmapi_took", l.listTook.String(), "ufds_took", ownersTook.String())
	return nil
}

// listAll lists the compute nodes, the pools and every active VM, and
// the networks the VMs name that are not cached yet.
func (f *Feed) listAll(ctx context.Context) (*listing, error) {
	servers, err := f.cnapi.ListServers(ctx)
	f.sink.ReportFeed(HealthCNAPI, err)
	if err == nil {
		f.servers.stamp(servers, f.now(), false)
	} else {
		var known bool
		if servers, known = f.servers.list(); !known {
			return nil, fmt.Errorf("no compute node listing yet: %w", err)
		}
	}
	if _, _, havePools := f.networks.snapshot(); !havePools {
		// Later listings use the pools the NAPI poller keeps fresh.
		pools, err := f.napi.ListNetworkPools(ctx)
		f.sink.ReportFeed(HealthNAPI, err)
		if err != nil {
			return nil, fmt.Errorf("no network pool listing yet: %w", err)
		}
		f.networks.setPools(pools)
	}
	listStart := time.Now()
	var l *listing
	err = f.vmapi.ListVMPages(ctx, VMFilter{State: "active"}, func() func([]dc.VM) error {
		l = &listing{vms: f.sink.BeginListing(), started: f.now(), servers: servers,
			owners: map[string]bool{}, nets: map[string]bool{}, macs: map[string]bool{}, destroyed: map[string]bool{}}
		return func(page []dc.VM) error {
			f.notePage(ctx, l, page)
			return nil
		}
	})
	f.sink.ReportFeed(HealthVMAPI, err)
	if err != nil {
		return nil, err
	}
	l.listTook = time.Since(listStart)
	if err := errors.Join(l.netsErr, f.fetchUnknownNetworks(ctx, l.nets)); err != nil && f.Status().FullSyncs == 0 {
		// Without them the first records would land in the wrong zones.
		return nil, fmt.Errorf("networks the VMs name: %w", err)
	}
	return l, nil
}

// notePage takes a page of the listing: its NICs without a network get
// theirs (legacyNICs), what the feed needs of its VMs is noted, and they
// go into the sink's listing.
func (f *Feed) notePage(ctx context.Context, l *listing, page []dc.VM) {
	vms := make([]*dc.VM, len(page))
	for i := range page {
		vms[i] = &page[i]
		noteNetworks(nil, l.macs, vms[i]) // (before legacyNICs gives them one)
	}
	if err := f.legacyNICs(ctx, vms); err != nil && l.netsErr == nil {
		l.netsErr = err
	}
	for _, vm := range vms {
		noteNetworks(l.nets, nil, vm)
	}
	f.mu.Lock()
	for i := range page {
		id := strings.ToLower(page[i].UUID)
		if _, ok := f.destroyed[id]; ok {
			l.destroyed[id] = true
		}
		if o := strings.ToLower(page[i].OwnerUUID); o != "" {
			l.owners[o] = true
		}
	}
	f.mu.Unlock()
	l.count += len(page)
	l.vms.Add(page)
}

// applyListing hands a listing to the sink as one complete inventory; the
// sink keeps what the changes since it began said over it.
func (f *Feed) applyListing(l *listing) *dc.Inventory {
	inv := &dc.Inventory{Servers: l.servers, Listing: l.vms}
	inv.Users = f.owners.keep(l.owners, f.owners.adminUUID(), l.started)
	// The networks as cached now: a change may have fetched one since
	// the listing resolved its VMs'. A poll may hand the sink a newer
	// snapshot while the listing is put: the cache's snapshot is handed on
	// again after it (the sink ignores networks that did not change), so
	// the last word is the newest.
	inv.Networks, inv.NetworkPools, _ = f.networks.snapshot()
	f.sink.SetInventory(inv, "vmapi full listing")
	f.applyNetworks("networks changed while a listing was put")
	return inv
}

// noteListing records an applied listing: the CNs and networks the
// pollers compare against, the destroyed VMs it no longer holds, and the
// status.
func (f *Feed) noteListing(l *listing, start time.Time) {
	f.servers.set(l.servers, false, nil)
	f.networks.keepOnly(l.nets, l.macs)
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, t := range f.destroyed {
		if !l.destroyed[id] && t.Before(l.started) { // (one destroyed since is not listed yet)
			delete(f.destroyed, id)
		}
	}
	f.status.FullSyncs++
	f.status.LastFullSync = f.now()
	f.status.LastFullSyncTook = time.Since(start)
	f.status.LastFullSyncVMs = l.count
}
