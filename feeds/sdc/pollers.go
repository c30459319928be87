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

// poller is one periodic refresh of a service the changefeed does not
// cover (CNAPI's compute nodes, NAPI's networks).
type poller struct {
	interval time.Duration
	// kick asks for a poll sooner than the interval; gap is the least time
	// between two polls it can ask for, so that a burst of kicks asks once
	// per gap. With dropKicksInGap, kicks sent during the gap are taken as
	// answered by the poll just made.
	kick           chan struct{}
	gap            time.Duration
	dropKicksInGap bool
	// poll lists and applies, reporting the service's health itself; an
	// error makes the next poll come after a backoff (within interval).
	poll func(context.Context) error
}

// runPoller polls every p.interval, or sooner when kicked, until ctx ends.
func (f *Feed) runPoller(ctx context.Context, p poller) {
	b := backoff{min: f.cfg.RetryMin, max: f.cfg.RetryMax}
	wait := p.interval
	for {
		if !sleepUnless(ctx, wait, p.kick) {
			return
		}
		if err := p.poll(ctx); err != nil {
			wait = min(b.next(), p.interval)
			continue
		}
		b.reset()
		wait = p.interval
		if !sleep(ctx, p.gap) {
			return
		}
		if p.dropKicksInGap {
			select {
			case <-p.kick:
			default:
			}
		}
	}
}

// cnapiPoller refreshes the compute nodes, periodically and soon after a
// VM changed state (at most every cnapiMinGap): a CN reboot shows first as
// its VMs changing state, and a burst of those asks once per gap.
func (f *Feed) cnapiPoller() poller {
	return poller{interval: f.cfg.CNAPIInterval, kick: f.cnapiNow,
		gap: min(cnapiMinGap, f.cfg.CNAPIInterval), poll: f.pollServers}
}

// napiPoller refreshes networks and pools periodically, and soon after a
// VM names a network the last listing lacked; a burst of VMs on a new
// network asks once.
func (f *Feed) napiPoller() poller {
	return poller{interval: f.cfg.NAPIInterval, kick: f.napiNow,
		gap: f.cfg.RetryMin, dropKicksInGap: true, poll: f.pollNetworks}
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
	for _, s := range f.applyServers(servers) {
		f.resyncServer(ctx, s)
	}
	return nil
}

// pollNetworks lists the networks and pools and applies them.
func (f *Feed) pollNetworks(ctx context.Context) error {
	nets, pools, err := f.listNetworks(ctx)
	f.sink.ReportFeed(HealthNAPI, err)
	if err != nil {
		return err
	}
	f.sinkMu.Lock()
	f.last.setNetworks(nets, pools)
	f.sink.SetNetworks(nets, pools, "networks polled")
	f.sinkMu.Unlock()
	return nil
}

// applyServers hands a CNAPI listing to the sink (which gives each set-up
// CN its CMON names) and returns the CNs whose VMs need a fresh look.
func (f *Feed) applyServers(servers []dc.Server) []string {
	now := f.now()
	f.sinkMu.Lock()
	defer f.sinkMu.Unlock()
	old := f.last.setServers(servers)
	var moved []string
	for _, s := range servers {
		id := strings.ToLower(s.UUID)
		if prev, ok := old[id]; ok && (prev.LastBoot != s.LastBoot || dc.ServerState(&prev, now) != dc.ServerState(&s, now)) {
			moved = append(moved, id)
		}
	}
	f.sink.SetServers(servers, "compute nodes polled")
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

// lastListings are the last good CNAPI and NAPI listings: what the
// pollers compare a new listing against, what a full listing falls back on
// when CNAPI or NAPI fails, and the networks a changed VM's NICs are
// checked against.
type lastListings struct {
	mu        sync.Mutex
	servers   map[string]dc.Server // by uuid, lower case
	haveCNAPI bool
	nets      []dc.Network
	pools     []dc.NetworkPool
	networks  map[string]bool // the uuids of nets, lower case
	haveNAPI  bool
}

func newLastListings() *lastListings {
	return &lastListings{servers: map[string]dc.Server{}, networks: map[string]bool{}}
}

// setServers records a CNAPI listing and returns the one it replaces.
func (l *lastListings) setServers(servers []dc.Server) (old map[string]dc.Server) {
	cur := make(map[string]dc.Server, len(servers))
	for _, s := range servers {
		cur[strings.ToLower(s.UUID)] = s
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old, l.servers, l.haveCNAPI = l.servers, cur, true
	return old
}

// lastServers returns the last CNAPI listing, and whether there was one.
func (l *lastListings) lastServers() ([]dc.Server, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Collect(maps.Values(l.servers)), l.haveCNAPI
}

// setNetworks records a NAPI listing.
func (l *lastListings) setNetworks(nets []dc.Network, pools []dc.NetworkPool) {
	set := make(map[string]bool, len(nets))
	for _, n := range nets {
		set[strings.ToLower(n.UUID)] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nets, l.pools, l.networks, l.haveNAPI = nets, pools, set, true
}

// lastNetworks returns the last NAPI listing, and whether there was one.
func (l *lastListings) lastNetworks() ([]dc.Network, []dc.NetworkPool, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nets, l.pools, l.haveNAPI
}

// unknownNetwork reports whether one of vm's NICs names a network the last
// NAPI listing lacked (never before the first listing).
func (l *lastListings) unknownNetwork(vm *dc.VM) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.haveNAPI {
		return false
	}
	for _, n := range vm.NICs {
		if n.NetworkUUID != "" && !l.networks[strings.ToLower(n.NetworkUUID)] {
			return true
		}
	}
	return false
}
