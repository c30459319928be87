package sdc

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// serversByUUIDMax is the most compute nodes a state-change refresh asks
// CNAPI for by uuid (GET /servers?uuids=...); more, and the listing
// without sysinfo is cheaper than the query string.
const serversByUUIDMax = 100

// serverCache is what cns knows of the compute nodes: the last good CNAPI
// answers (what the pollers compare a new one against, what a full
// listing falls back on when CNAPI fails), when each CN was first seen
// not running (the clock of the CN-down rule when last_heartbeat is
// null), and the CNs whose VMs changed state since the last look.
type serverCache struct {
	mu         sync.Mutex
	servers    map[string]dc.Server // by uuid, lower case
	have       bool
	notRunning map[string]time.Time
	changed    map[string]bool
}

func newServerCache() *serverCache {
	return &serverCache{servers: map[string]dc.Server{}, notRunning: map[string]time.Time{}, changed: map[string]bool{}}
}

// stamp sets each server's NotRunningSince from when cns first saw it
// not running, at now for those seen so now. partial: servers is not the
// whole data center (the others keep their times).
func (c *serverCache) stamp(servers []dc.Server, now time.Time, partial bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]bool, len(servers))
	for i := range servers {
		s := &servers[i]
		id := strings.ToLower(s.UUID)
		seen[id] = true
		if s.Status == "running" {
			delete(c.notRunning, id)
			s.NotRunningSince = time.Time{}
			continue
		}
		since, ok := c.notRunning[id]
		if !ok {
			since = now
			c.notRunning[id] = since
		}
		s.NotRunningSince = since
	}
	if !partial {
		for id := range c.notRunning {
			if !seen[id] {
				delete(c.notRunning, id)
			}
		}
	}
}

// set records a CNAPI answer and returns the servers it replaces and the
// whole set now known. A partial answer (some CNs, without sysinfo)
// updates those CNs and keeps their sysinfo from the last full one.
//
// apply, when not nil, is given the servers as they are now, under the
// cache's lock: of two concurrent calls, the later answer is the one
// applied last.
func (c *serverCache) set(servers []dc.Server, partial bool, apply func([]dc.Server)) (old, cur map[string]dc.Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old = c.servers
	if partial {
		cur = maps.Clone(old)
	} else {
		cur = make(map[string]dc.Server, len(servers))
		c.have = true
	}
	for _, s := range servers {
		id := strings.ToLower(s.UUID)
		if prev, ok := old[id]; ok && partial && s.Sysinfo == nil {
			s.Sysinfo = prev.Sysinfo
		}
		cur[id] = s
	}
	c.servers = cur
	if apply != nil {
		apply(sortedServers(cur))
	}
	return old, cur
}

// list returns the known servers, and whether a full listing was had.
func (c *serverCache) list() ([]dc.Server, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return sortedServers(c.servers), c.have
}

func sortedServers(m map[string]dc.Server) []dc.Server {
	out := make([]dc.Server, 0, len(m))
	for _, id := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[id])
	}
	return out
}

// noteChanged records that a VM on server changed state.
func (c *serverCache) noteChanged(server string) {
	c.mu.Lock()
	c.changed[strings.ToLower(server)] = true
	c.mu.Unlock()
}

// takeChanged returns and forgets the CNs noted since the last call.
func (c *serverCache) takeChanged() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := slices.Sorted(maps.Keys(c.changed))
	clear(c.changed)
	return ids
}

// cnapiPoller lists every compute node, with sysinfo, on the slow timer
// (the reference's 60 s).
func (f *Feed) cnapiPoller() poller {
	return poller{interval: f.cfg.CNAPIInterval, poll: f.pollServers}
}

// pollServers lists the compute nodes and applies them. A CN that rebooted
// or changed its down state gets its VMs listed again (the reference's
// targeted poll), since their state moved while the CN was away.
func (f *Feed) pollServers(ctx context.Context) error {
	servers, err := f.cnapi.ListServers(ctx)
	f.sink.ReportFeed(HealthCNAPI, err)
	if err != nil {
		return err
	}
	f.servers.stamp(servers, f.now(), false)
	for _, s := range f.applyServers(servers, false) {
		f.resyncServer(ctx, s)
	}
	return nil
}

// serverChanged notes that a VM on server changed state: a CN reboot shows
// first as its VMs changing state, so cns looks at that CN now rather
// than at the next poll, and the VMs coming back on a CN booted minutes
// ago stay out of services (the CN-down rule) instead of flapping.
func (f *Feed) serverChanged(server string) {
	if !dc.IsUUID(server) {
		return
	}
	f.servers.noteChanged(server)
	signal(f.cnapiNow)
}

// watchServerChanges looks at the CNs whose VMs changed state, at most
// every cnapiMinGap, asking CNAPI only for those CNs and without sysinfo
// (a burst over a whole data center asks for the listing without
// sysinfo), so that a burst of VM changes does not list every CN with
// its sysinfo again and again.
func (f *Feed) watchServerChanges(ctx context.Context) {
	gap := min(cnapiMinGap, f.cfg.CNAPIInterval)
	b := backoff{min: f.cfg.RetryMin, max: f.cfg.RetryMax}
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.cnapiNow:
		}
		ids := f.servers.takeChanged()
		if len(ids) == 0 {
			continue
		}
		if err := f.refreshServers(ctx, ids); err != nil {
			for _, id := range ids {
				f.servers.noteChanged(id)
			}
			signal(f.cnapiNow)
			if !sleep(ctx, b.next()) {
				return
			}
			continue
		}
		b.reset()
		if !sleep(ctx, gap) {
			return
		}
	}
}

// refreshServers asks CNAPI about some CNs and applies the answer.
func (f *Feed) refreshServers(ctx context.Context, ids []string) error {
	if len(ids) > serversByUUIDMax {
		ids = nil // every CN, without sysinfo
	}
	servers, err := f.cnapi.ServerStatus(ctx, ids)
	f.sink.ReportFeed(HealthCNAPI, err)
	if err != nil {
		return err
	}
	f.servers.stamp(servers, f.now(), true)
	for _, s := range f.applyServers(servers, true) {
		f.resyncServer(ctx, s)
	}
	return nil
}

// applyServers hands a CNAPI answer to the sink (which gives each set-up
// CN its CMON names) and returns the CNs whose VMs need a fresh look. A
// partial answer updates the CNs it names.
func (f *Feed) applyServers(servers []dc.Server, partial bool) []string {
	now := f.now()
	old, _ := f.servers.set(servers, partial, func(cur []dc.Server) { f.sink.SetServers(cur, "compute nodes polled") })
	var moved []string
	for _, s := range servers {
		id := strings.ToLower(s.UUID)
		if prev, ok := old[id]; ok && (prev.LastBoot != s.LastBoot || dc.ServerState(&prev, now) != dc.ServerState(&s, now)) {
			moved = append(moved, id)
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
		f.prepare(ctx, &vms[i])
		f.applyVM(strings.ToLower(vms[i].UUID), &vms[i], 0, "compute node changed")
	}
}
