package sdc

import (
	"context"
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

// listing is one full listing, before it is applied.
type listing struct {
	since    uint64    // the sink's BeginListing
	started  time.Time // f.now() then
	servers  []dc.Server
	vms      []dc.VM
	listTook time.Duration // VMAPI's part
}

// fullSync lists everything and applies it as one complete inventory. A
// listing that failed anywhere is not applied. CNAPI and NAPI failures
// fall back on their last good answer; with none yet, the listing fails,
// since without them records would land in the wrong zones. Owners UFDS
// cannot give stay unknown, which makes the sink keep their VMs' records.
func (f *Feed) fullSync(ctx context.Context) error {
	start := time.Now()
	l := &listing{since: f.sink.BeginListing(), started: f.now()}
	if err := f.listAll(ctx, l); err != nil {
		return err
	}
	ownersStart := time.Now()
	f.lookUpOwners(ctx, l.vms)
	ownersTook := time.Since(ownersStart)
	inv := f.applyListing(l)
	f.noteListing(l, inv, start)
	f.syncedOnce.Do(func() { close(f.synced) })
	f.log.Info("full listing applied", "vms", len(l.vms), "servers", len(l.servers), "users", len(inv.Users),
		"took", time.Since(start).String(), "vmapi_took", l.listTook.String(), "ufds_took", ownersTook.String())
	return nil
}

// listAll lists the compute nodes, the pools and every active VM, and
// the networks the VMs name that are not cached yet.
func (f *Feed) listAll(ctx context.Context, l *listing) error {
	var err error
	l.servers, err = f.cnapi.ListServers(ctx)
	f.sink.ReportFeed(HealthCNAPI, err)
	if err == nil {
		f.servers.stamp(l.servers, f.now(), false)
	} else {
		var known bool
		if l.servers, known = f.servers.list(); !known {
			return fmt.Errorf("no compute node listing yet: %w", err)
		}
	}
	if _, _, havePools := f.networks.snapshot(); !havePools {
		// Later listings use the pools the NAPI poller keeps fresh.
		pools, err := f.napi.ListNetworkPools(ctx)
		f.sink.ReportFeed(HealthNAPI, err)
		if err != nil {
			return fmt.Errorf("no network pool listing yet: %w", err)
		}
		f.networks.setPools(pools)
	}
	listStart := time.Now()
	l.vms, err = f.vmapi.ListAllVMs(ctx, VMFilter{State: "active"})
	f.sink.ReportFeed(HealthVMAPI, err)
	if err != nil {
		return err
	}
	l.listTook = time.Since(listStart)
	vms := make([]*dc.VM, len(l.vms))
	for i := range l.vms {
		vms[i] = &l.vms[i]
	}
	if err := f.resolveNetworks(ctx, vms); err != nil && f.Status().FullSyncs == 0 {
		// Without them the first records would land in the wrong zones.
		return fmt.Errorf("networks the VMs name: %w", err)
	}
	return nil
}

// applyListing hands a listing to the sink as one complete inventory; the
// sink keeps what the changes since it began (l.since) said over it.
func (f *Feed) applyListing(l *listing) *dc.Inventory {
	admin := f.owners.adminUUID()
	owners := make(map[string]bool)
	for i := range l.vms {
		owners[strings.ToLower(l.vms[i].OwnerUUID)] = true
	}
	inv := &dc.Inventory{VMs: l.vms, Servers: l.servers, Since: l.since}
	inv.Users = f.owners.keep(owners, admin, l.started)
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
func (f *Feed) noteListing(l *listing, inv *dc.Inventory, start time.Time) {
	f.servers.set(l.servers, false, nil)
	f.networks.keepOnly(referenced(l.vms))
	f.mu.Lock()
	defer f.mu.Unlock()
	listed := make(map[string]bool, len(inv.VMs))
	for i := range inv.VMs {
		listed[strings.ToLower(inv.VMs[i].UUID)] = true
	}
	for id, t := range f.destroyed {
		if !listed[id] && t.Before(l.started) { // (one destroyed since is not listed yet)
			delete(f.destroyed, id)
		}
	}
	f.status.FullSyncs++
	f.status.LastFullSync = f.now()
	f.status.LastFullSyncTook = time.Since(start)
	f.status.LastFullSyncVMs = len(l.vms)
}
