package sdc

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// networkGetMax is the most networks fetched one by one (GET
// /networks/:uuid); more at once, as at the first listing of a data
// center with thousands of fabric networks, and the paged listing is
// fewer requests.
const networkGetMax = 32

// networkCache is what cns knows from NAPI: the networks the VMs' NICs
// name (only their name and owners matter, for network-name records),
// those NAPI could not give, every network pool (a zone may name a
// pool), and the networks of NICs that VMAPI lists without one (older
// VMs), found by GET /nics/:mac. The reference fetched pools every 10
// minutes and networks on demand; so does cns, rather than listing every
// network of the data center.
type networkCache struct {
	mu        sync.Mutex
	nets      map[string]dc.Network // by uuid, lower case
	missing   map[string]bool       // named by a NIC, not had from NAPI (404 or failure)
	pools     []dc.NetworkPool
	havePools bool
	nicNets   map[string]string // MAC (12 lower-case hex digits) -> network uuid
}

func newNetworkCache() *networkCache {
	return &networkCache{nets: map[string]dc.Network{}, missing: map[string]bool{}, nicNets: map[string]string{}}
}

// unknown returns the networks of ids neither cached nor known missing.
func (c *networkCache) unknown(ids map[string]bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id := range ids {
		if _, ok := c.nets[id]; !ok && !c.missing[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// put caches fetched networks and marks gone ones missing, reporting
// whether the networks handed to the sink change.
func (c *networkCache) put(nets []dc.Network, gone []string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	for _, n := range nets {
		id := strings.ToLower(n.UUID)
		if old, ok := c.nets[id]; !ok || !sameNetwork(old, n) {
			changed = true
		}
		c.nets[id] = n
		delete(c.missing, id)
	}
	for _, id := range gone {
		if _, ok := c.nets[id]; ok {
			delete(c.nets, id)
			changed = true
		}
		c.missing[id] = true
	}
	return changed
}

func sameNetwork(a, b dc.Network) bool {
	return a.UUID == b.UUID && a.Name == b.Name && a.Family == b.Family && a.Subnet == b.Subnet &&
		a.NICTag == b.NICTag && a.Fabric == b.Fabric && slices.Equal(a.OwnerUUIDs, b.OwnerUUIDs) &&
		(a.VLANID == nil) == (b.VLANID == nil) && (a.VLANID == nil || *a.VLANID == *b.VLANID)
}

// setPools records a pool listing, reporting whether it changed.
func (c *networkCache) setPools(pools []dc.NetworkPool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := !c.havePools || !slices.EqualFunc(c.pools, pools, func(a, b dc.NetworkPool) bool {
		return a.UUID == b.UUID && a.Name == b.Name && slices.Equal(a.Networks, b.Networks) &&
			slices.Equal(a.OwnerUUIDs, b.OwnerUUIDs)
	})
	c.pools, c.havePools = pools, true
	return changed
}

// snapshot returns the cached networks and pools, and whether pools were
// ever listed.
func (c *networkCache) snapshot() ([]dc.Network, []dc.NetworkPool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nets := make([]dc.Network, 0, len(c.nets))
	for _, id := range slices.Sorted(maps.Keys(c.nets)) {
		nets = append(nets, c.nets[id])
	}
	return nets, c.pools, c.havePools
}

// apply hands a snapshot of the networks and pools to fn under the
// cache's lock: of two concurrent calls, the later snapshot is the one
// fn is given last.
func (c *networkCache) apply(fn func([]dc.Network, []dc.NetworkPool)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nets := make([]dc.Network, 0, len(c.nets))
	for _, id := range slices.Sorted(maps.Keys(c.nets)) {
		nets = append(nets, c.nets[id])
	}
	fn(nets, c.pools)
}

// wanted returns every network a refresh looks at again: the cached and
// the missing ones.
func (c *networkCache) wanted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Collect(maps.Keys(c.nets))
	for id := range c.missing {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// keepOnly forgets the networks and NIC look-ups no VM of a full listing
// names any more.
func (c *networkCache) keepOnly(nets, macs map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	maps.DeleteFunc(c.nets, func(id string, _ dc.Network) bool { return !nets[id] })
	maps.DeleteFunc(c.missing, func(id string, _ bool) bool { return !nets[id] })
	maps.DeleteFunc(c.nicNets, func(mac string, _ string) bool { return !macs[mac] })
}

func (c *networkCache) nicNetwork(mac string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nicNets[mac]
	return n, ok
}

func (c *networkCache) setNICNetwork(mac, network string) {
	c.mu.Lock()
	c.nicNets[mac] = network
	c.mu.Unlock()
}

// napiPoller refreshes the pools and the cached networks on the slow timer
// (the reference's 10 minutes for pools), and soon after a NAPI failure
// left a network a VM names unknown.
func (f *Feed) napiPoller() poller {
	return poller{interval: f.cfg.NAPIInterval, kick: f.napiNow,
		gap: f.cfg.RetryMin, dropKicksInGap: true, poll: f.refreshNetworks}
}

// refreshNetworks lists the pools and fetches again every network the
// VMs name, applying what changed.
func (f *Feed) refreshNetworks(ctx context.Context) error {
	err := f.refreshNetworksOnce(ctx)
	f.sink.ReportFeed(HealthNAPI, err)
	return err
}

func (f *Feed) refreshNetworksOnce(ctx context.Context) error {
	pools, err := f.napi.ListNetworkPools(ctx)
	if err != nil {
		return err
	}
	changed := f.networks.setPools(pools)
	nets, gone, err := f.fetchNetworks(ctx, f.networks.wanted())
	if f.networks.put(nets, gone) {
		changed = true
	}
	if changed {
		f.applyNetworks("networks polled")
	}
	return err
}

// applyNetworks hands the cached networks and pools to the sink.
func (f *Feed) applyNetworks(cause string) {
	f.networks.apply(func(nets []dc.Network, pools []dc.NetworkPool) { f.sink.SetNetworks(nets, pools, cause) })
}

// fetchNetworks fetches networks by uuid: one by one when few, from the
// paged listing when many. It returns those found, those NAPI does not
// have, and the first other error (the networks not reached then are in
// neither list).
func (f *Feed) fetchNetworks(ctx context.Context, ids []string) (found []dc.Network, gone []string, err error) {
	if len(ids) > networkGetMax {
		all, err := f.napi.ListNetworks(ctx)
		if err != nil {
			return nil, nil, err
		}
		byID := make(map[string]dc.Network, len(all))
		for _, n := range all {
			byID[strings.ToLower(n.UUID)] = n
		}
		for _, id := range ids {
			if n, ok := byID[id]; ok {
				found = append(found, n)
			} else {
				gone = append(gone, id)
			}
		}
		return found, gone, nil
	}
	for _, id := range ids {
		n, err := f.napi.GetNetwork(ctx, id)
		switch {
		case err == nil:
			found = append(found, *n)
		case errors.Is(err, ErrNotFound):
			gone = append(gone, id)
		default:
			return found, gone, err
		}
	}
	return found, gone, nil
}

// resolveNetworks makes sure the sink knows the networks the NICs of vms
// name before the VMs are applied, so that each lands in its zones the
// first time: a NIC without network_uuid (older VMs) gets it from NAPI's
// NIC (legacyNICs), and networks not cached are fetched. A failure leaves
// the network to the NAPI poller, kicked to retry it; the VM is applied
// meanwhile as NAPI leaves it (a NIC of an unknown network lands only in
// "*" zones).
func (f *Feed) resolveNetworks(ctx context.Context, vms []*dc.VM) error {
	err := f.legacyNICs(ctx, vms)
	ids := map[string]bool{}
	for _, vm := range vms {
		noteNetworks(ids, nil, vm)
	}
	return errors.Join(err, f.fetchUnknownNetworks(ctx, ids))
}

// legacyNICs gives the NICs of vms without network_uuid theirs, from
// NAPI's NIC with that MAC (GET /nics/:mac, as the reference's legacy
// filter). It returns the first failure, reported.
func (f *Feed) legacyNICs(ctx context.Context, vms []*dc.VM) error {
	var firstErr error
	for _, vm := range vms {
		for i := range vm.NICs {
			nic := &vm.NICs[i]
			if nic.NetworkUUID == "" && nic.MAC != "" {
				if err := f.legacyNIC(ctx, vm, nic); err != nil && firstErr == nil {
					firstErr = err
				}
			}
		}
	}
	f.reportNAPI(firstErr)
	return firstErr
}

// fetchUnknownNetworks fetches the networks of ids that are not cached,
// and hands the sink the cache when it changed. It returns the failure,
// reported.
func (f *Feed) fetchUnknownNetworks(ctx context.Context, ids map[string]bool) error {
	todo := f.networks.unknown(ids)
	if len(todo) == 0 {
		return nil
	}
	nets, gone, err := f.fetchNetworks(ctx, todo)
	if err != nil {
		got := map[string]bool{}
		for _, n := range nets {
			got[strings.ToLower(n.UUID)] = true
		}
		for _, id := range todo {
			if !got[id] && !slices.Contains(gone, id) {
				gone = append(gone, id) // retried by the poller
			}
		}
	}
	if f.networks.put(nets, gone) {
		f.applyNetworks("network named by a VM")
	}
	f.reportNAPI(err)
	return err
}

// reportNAPI reports a failure to resolve a VM's networks, and has the
// NAPI poller retry soon.
func (f *Feed) reportNAPI(err error) {
	if err != nil {
		f.sink.ReportFeed(HealthNAPI, err)
		signal(f.napiNow)
	}
}

// legacyNIC fills in the network of a NIC VMAPI lists without one, from
// NAPI's NIC with that MAC, which must belong to the VM. The answer is
// cached: a NIC keeps its network for life.
func (f *Feed) legacyNIC(ctx context.Context, vm *dc.VM, nic *dc.NIC) error {
	mac, ok := normalMAC(nic.MAC)
	if !ok {
		return nil
	}
	if net, ok := f.networks.nicNetwork(mac); ok {
		nic.NetworkUUID = net
		return nil
	}
	n, err := f.napi.GetNIC(ctx, mac)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !strings.EqualFold(n.BelongsToUUID, vm.UUID) || n.NetworkUUID == "" {
		f.log.Warn("NAPI's NIC does not belong to the VM listing it; its network stays unknown",
			"vm", vm.UUID, "mac", nic.MAC, "belongs_to_uuid", n.BelongsToUUID)
		return nil
	}
	net := strings.ToLower(n.NetworkUUID)
	f.networks.setNICNetwork(mac, net)
	nic.NetworkUUID = net
	if nic.IP == "" && len(nic.IPs) == 0 {
		nic.IP = n.IP
	}
	return nil
}

// normalMAC returns a MAC's 12 lower-case hex digits, the form NAPI's
// GET /nics/:mac takes (older NAPIs only take it without colons).
func normalMAC(mac string) (string, bool) {
	m := strings.ToLower(strings.ReplaceAll(mac, ":", ""))
	if len(m) != 12 || strings.Trim(m, "0123456789abcdef") != "" {
		return "", false
	}
	return m, true
}

// noteNetworks adds to nets the networks vm's NICs name, and to macs the
// MACs of those that name none: the NICs whose network comes from NAPI's
// NIC (legacyNIC, cached by MAC). A nil map is left out.
func noteNetworks(nets, macs map[string]bool, vm *dc.VM) {
	for _, nic := range vm.NICs {
		if nic.NetworkUUID == "" {
			if m, ok := normalMAC(nic.MAC); ok && macs != nil {
				macs[m] = true
			}
		} else if nets != nil {
			nets[strings.ToLower(nic.NetworkUUID)] = true
		}
	}
}
