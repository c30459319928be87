// Package feeds turns what the data center says (from the SDC APIs or an
// inventory file) into change sets for the store. The Updater is the only
// writer: sources tell it what they saw, it works out which VMs need their
// records recomputed, and commits them in batches.
package feeds

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/hysteresis"
	"github.com/tritondatacenter/cns/feeds/records"
	"github.com/tritondatacenter/cns/feeds/sdc"
)

// StoreFeed is the name under which the db's health is reported with the
// feeds: degraded while commits fail (disk full, read-only).
const StoreFeed = "db"

// maxVMsPerCommit bounds one change set.
const maxVMsPerCommit = 5000

// Options configure an Updater.
type Options struct {
	Records records.Config
	Zones   db.ZoneConfig
	// BatchWindow is how long changes gather before one commit (default
	// 100 ms): a burst of changes becomes one serial.
	BatchWindow time.Duration
	Logger      *slog.Logger
	Now         func() time.Time
	// Hysteresis is the self-removal policy (zero fields: RFD 1's 60 s
	// window and 600 s last-member delay).
	Hysteresis hysteresis.Policy
}

// Updater holds the data center as the sources last described it and
// commits what follows from it.
type Updater struct {
	store  *db.DB
	log    *slog.Logger
	now    func() time.Time
	window time.Duration

	mu         sync.Mutex
	cfg        records.Config
	zones      db.ZoneConfig
	zonesDirty bool                    // the zone config must go into the next change set
	users      map[string]*sdc.User    // by uuid
	logins     map[string]*sdc.User    // by login
	servers    map[string]*serverFacts // by uuid
	networks   map[string]*sdc.Network // by uuid
	pools      map[string][]string     // network uuid → pool uuids
	poolNets   map[string][]string     // pool uuid → network uuids
	poolList   []sdc.NetworkPool       // as last given, to notice changes
	vms        map[string]*storedVM    // by uuid: what records reads, encoded
	strs       map[string]string       // interned owner and server UUIDs
	byOwner    map[string]map[string]bool
	byServer   map[string]map[string]bool
	known      map[string]bool   // VMs the store holds
	hashes     map[string]uint64 // what each stored VM's records and decision hash to
	dirty      map[string]uint64 // VMs to recompute (or delete), by the generation that marked them
	gen        uint64
	causes     map[string]int // why the pending batch exists, for the journal
	haveFull   bool           // a full listing has been applied
	kick       chan struct{}
	commits    uint64
	lastCommit CommitInfo
	hist       Histogram
	burst      int // VMs computed since the dirty set was last empty
	feeds      map[string]FeedStatus
	health     *serviceHealth // self-removal hysteresis (hysteresis.go)
	sources    []SourceBatch  // aggregated sources' changes (sources.go)
}

// serverFacts is a CN and the state cns concluded for it.
type serverFacts struct {
	server sdc.Server
	state  sdc.CNState
	down   bool // the effective decision (unknown keeps the previous one)
}

// CommitInfo describes the last commit the updater made.
type CommitInfo struct {
	Time     time.Time
	VMs      int
	Duration time.Duration
	Err      string
}

// NewUpdater returns an Updater writing to store. It reads which VMs the
// store holds, so a full listing can remove the ones that are gone.
func NewUpdater(store *db.DB, o Options) (*Updater, error) {
	u := &Updater{
		store: store, log: o.Logger, now: o.Now, window: o.BatchWindow,
		cfg: o.Records, zones: o.Zones, zonesDirty: true,
		users: map[string]*sdc.User{}, logins: map[string]*sdc.User{},
		servers: map[string]*serverFacts{}, networks: map[string]*sdc.Network{}, pools: map[string][]string{},
		vms: map[string]*storedVM{}, strs: map[string]string{}, byOwner: map[string]map[string]bool{}, byServer: map[string]map[string]bool{},
		known: map[string]bool{}, dirty: map[string]uint64{}, causes: map[string]int{},
		kick: make(chan struct{}, 1), feeds: map[string]FeedStatus{},
	}
	if u.log == nil {
		u.log = slog.Default()
	}
	if u.now == nil {
		u.now = time.Now
	}
	if u.window == 0 {
		u.window = 100 * time.Millisecond
	}
	// The hashes name every stored VM; reading them touches a few MB of
	// the file instead of every VM entry.
	hashes, err := store.VMHashes()
	if err != nil {
		return nil, err
	}
	u.hashes = hashes
	for uuid := range hashes {
		u.known[uuid] = true
	}
	if u.health, err = loadServiceHealth(store, o.Hysteresis, u.now(), u.log); err != nil {
		return nil, err
	}
	return u, nil
}

// SetConfig replaces the naming and zone configuration: every VM is
// recomputed and the zone apexes are updated in the next commit.
func (u *Updater) SetConfig(rc records.Config, zc db.ZoneConfig) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.cfg, u.zones, u.zonesDirty = rc, zc, true
	u.markAll("configuration changed")
	u.wake()
}

// SetInventory applies a complete description of the data center: VMs
// missing from it are gone. This is what the file feed and a full SDC
// listing give.
func (u *Updater) SetInventory(inv *sdc.Inventory, cause string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.setUsers(inv.Users, cause)
	u.setNetworks(inv.Networks, inv.NetworkPools, cause)
	u.setServers(inv.Servers, cause)
	seen := make(map[string]bool, len(inv.VMs))
	for i := range inv.VMs {
		vm := &inv.VMs[i]
		seen[strings.ToLower(vm.UUID)] = true
		u.setVM(vm, cause)
	}
	for uuid := range u.vms {
		if !seen[uuid] {
			u.removeVM(uuid, cause)
		}
	}
	for uuid := range u.known {
		if !seen[uuid] && u.vms[uuid] == nil && !ExternalUUID(uuid) {
			u.mark(uuid) // stored but gone while cns was not looking
			u.causes[cause]++
		}
	}
	u.haveFull = true
	u.wake()
}

// SetVM records the current state of one VM (from a changefeed event or
// a targeted listing). A destroyed VM stays known, listed as destroyed.
func (u *Updater) SetVM(vm *sdc.VM, cause string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.setVM(vm, cause)
	u.wake()
}

// RemoveVM forgets a VM that the data center confirms is gone.
func (u *Updater) RemoveVM(uuid, cause string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	uuid = strings.ToLower(uuid)
	u.removeVM(uuid, cause)
	if u.known[uuid] {
		u.mark(uuid)
	}
	u.wake()
}

// SetUser records one account (a UFDS lookup or changelog entry).
func (u *Updater) SetUser(usr sdc.User, cause string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	users := make([]sdc.User, 0, len(u.users)+1)
	for _, x := range u.users {
		if x.UUID != strings.ToLower(usr.UUID) {
			users = append(users, *x)
		}
	}
	u.setUsers(append(users, usr), cause)
	u.wake()
}

// SetServers replaces the compute nodes (a CNAPI listing).
func (u *Updater) SetServers(servers []sdc.Server, cause string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.setServers(servers, cause)
	u.wake()
}

// SetNetworks replaces the networks and pools (NAPI listings).
func (u *Updater) SetNetworks(nets []sdc.Network, pools []sdc.NetworkPool, cause string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.setNetworks(nets, pools, cause)
	u.wake()
}

// VMUUIDs returns the UUIDs of the VMs the updater knows of, in memory or
// in the store.
func (u *Updater) VMUUIDs() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	set := maps.Clone(u.known)
	for id := range u.vms {
		set[id] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// markAll marks every VM, and every VM the store knows, for recomputation.
func (u *Updater) markAll(cause string) {
	for uuid := range u.vms {
		u.mark(uuid)
	}
	u.causes[cause]++
}

// mark queues uuid for the next commit.
func (u *Updater) mark(uuid string) {
	u.gen++
	u.dirty[uuid] = u.gen
}

func (u *Updater) markSet(set map[string]bool, cause string) {
	for uuid := range set {
		u.mark(uuid)
	}
	if len(set) > 0 {
		u.causes[cause]++
	}
}

func (u *Updater) setUsers(users []sdc.User, cause string) {
	next := make(map[string]*sdc.User, len(users))
	for i := range users {
		usr := users[i]
		usr.UUID = strings.ToLower(usr.UUID)
		next[usr.UUID] = &usr
	}
	for id, usr := range next {
		if old := u.users[id]; old == nil || *old != *usr {
			u.markSet(u.byOwner[id], cause)
			if old != nil && old.Login != usr.Login {
				u.markSet(u.byOwner[old.Login], cause)
			}
			u.markSet(u.byOwner[usr.Login], cause) // VMs owned by login (CN cmon VMs)
		}
	}
	for id, old := range u.users {
		if next[id] == nil {
			u.markSet(u.byOwner[id], cause)
			u.markSet(u.byOwner[old.Login], cause)
		}
	}
	u.users = next
	u.logins = make(map[string]*sdc.User, len(next))
	for _, usr := range next {
		u.logins[usr.Login] = usr
	}
}

func (u *Updater) setNetworks(nets []sdc.Network, pools []sdc.NetworkPool, cause string) {
	next := make(map[string]*sdc.Network, len(nets))
	for i := range nets {
		n := nets[i]
		next[strings.ToLower(n.UUID)] = &n
	}
	changed := len(next) != len(u.networks)
	for id, n := range next {
		if old := u.networks[id]; old == nil || !reflect.DeepEqual(old, n) {
			changed = true
		}
	}
	if !reflect.DeepEqual(pools, u.poolList) {
		changed = true
	}
	if !changed {
		return
	}
	u.networks = next
	u.poolList = slices.Clone(pools)
	u.pools = map[string][]string{}
	u.poolNets = map[string][]string{}
	for _, p := range pools {
		for _, n := range p.Networks {
			u.poolNets[strings.ToLower(p.UUID)] = append(u.poolNets[strings.ToLower(p.UUID)], strings.ToLower(n))
		}
		for _, n := range p.Networks {
			u.pools[strings.ToLower(n)] = append(u.pools[strings.ToLower(n)], strings.ToLower(p.UUID))
		}
	}
	u.markAll(cause)
}

func (u *Updater) setServers(servers []sdc.Server, cause string) {
	now := u.now()
	next := make(map[string]*serverFacts, len(servers))
	for i := range servers {
		s := servers[i]
		id := strings.ToLower(s.UUID)
		f := &serverFacts{server: s, state: sdc.ServerState(&s, now)}
		old := u.servers[id]
		switch f.state {
		case sdc.CNDown:
			f.down = true
		case sdc.CNUnknown:
			f.down = old != nil && old.down
		}
		if old == nil || old.down != f.down {
			u.markSet(u.byServer[id], cause)
		}
		next[id] = f
	}
	for id := range u.servers {
		if next[id] == nil {
			u.markSet(u.byServer[id], cause)
		}
	}
	u.servers = next
}

// Tick re-applies the time-dependent rules (a CN's heartbeat going stale,
// a recent boot settling). Run calls it periodically.
func (u *Updater) Tick() {
	u.mu.Lock()
	defer u.mu.Unlock()
	servers := make([]sdc.Server, 0, len(u.servers))
	for _, f := range u.servers {
		servers = append(servers, f.server)
	}
	u.setServers(servers, "compute node state changed")
	u.releaseDue()
	if len(u.dirty) > 0 {
		u.wake()
	}
}

// storedVM is one VM as the updater keeps it between changes: the facts
// records reads, JSON-encoded (a few hundred bytes, where the decoded
// object with its maps took about a kilobyte), and the UUIDs the indexes
// need. It is decoded again only when the VM is recomputed.
type storedVM struct {
	owner, server string
	facts         []byte
}

// vm decodes the stored facts.
func (v *storedVM) vm() (*sdc.VM, error) {
	var vm sdc.VM
	if err := json.Unmarshal(v.facts, &vm); err != nil {
		return nil, err
	}
	return &vm, nil
}

// intern returns a shared copy of s: owner and server UUIDs repeat
// across VMs.
func (u *Updater) intern(s string) string {
	if v, ok := u.strs[s]; ok {
		return v
	}
	u.strs[s] = s
	return s
}

// setVM records vm's current state and marks it when it changed.
func (u *Updater) setVM(vm *sdc.VM, cause string) {
	t := trimVM(vm)
	facts, err := json.Marshal(t)
	if err != nil {
		u.log.Warn("vm not encodable; ignored", "vm", t.UUID, "err", err)
		return
	}
	old := u.vms[t.UUID]
	if old != nil && bytes.Equal(old.facts, facts) {
		return
	}
	if old != nil {
		delete(u.byOwner[old.owner], t.UUID)
		delete(u.byServer[old.server], t.UUID)
	}
	u.vms[t.UUID] = &storedVM{owner: u.intern(t.OwnerUUID), server: u.intern(t.ServerUUID), facts: facts}
	addIndex(u.byOwner, t.OwnerUUID, t.UUID)
	addIndex(u.byServer, t.ServerUUID, t.UUID)
	u.mark(t.UUID)
	u.causes[cause]++
}

func (u *Updater) removeVM(uuid, cause string) {
	old := u.vms[uuid]
	if old == nil {
		return
	}
	delete(u.byOwner[old.owner], uuid)
	delete(u.byServer[old.server], uuid)
	delete(u.vms, uuid)
	u.mark(uuid)
	u.causes[cause]++
}

func addIndex(idx map[string]map[string]bool, key, uuid string) {
	if idx[key] == nil {
		idx[key] = map[string]bool{}
	}
	idx[key][uuid] = true
}

// trimVM keeps what record generation reads, so memory stays small and
// irrelevant changes (memory, last_modified...) trigger nothing.
func trimVM(vm *sdc.VM) *sdc.VM {
	t := &sdc.VM{
		UUID:       strings.ToLower(vm.UUID),
		Alias:      vm.Alias,
		OwnerUUID:  strings.ToLower(vm.OwnerUUID),
		ServerUUID: strings.ToLower(vm.ServerUUID),
		State:      vm.State,
		Docker:     vm.Docker,
		Destroyed:  vm.Destroyed,
	}
	// Of a NIC, records reads its addresses, network and tag.
	for _, n := range vm.NICs {
		t.NICs = append(t.NICs, sdc.NIC{IP: n.IP, IPs: n.IPs, NetworkUUID: n.NetworkUUID, NICTag: n.NICTag, VLANID: n.VLANID})
	}
	t.Tags = keepKeys(vm.Tags)
	t.CustomerMetadata = keepKeys(vm.CustomerMetadata)
	if records.NeedsLastModified(t) {
		t.LastModified = vm.LastModified // orders members' gRPC configs
	}
	return t
}

// keepKeys keeps the tag and metadata keys cns reads.
func keepKeys(m map[string]any) map[string]any {
	var out map[string]any
	for k, v := range m {
		if strings.HasPrefix(k, "triton.cns.") || strings.HasPrefix(k, "docker:label:triton.cns.") ||
			k == "smartdc_role" || k == "manta_role" {
			if out == nil {
				out = map[string]any{}
			}
			out[k] = v
		}
	}
	return out
}

func (u *Updater) wake() {
	select {
	case u.kick <- struct{}{}:
	default:
	}
}

// Run commits batches until ctx ends. A failed commit is retried with
// backoff; what was stored before keeps being served.
func (u *Updater) Run(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	backoff := time.Duration(0)
	for {
		var due <-chan time.Time // a held service member's turn
		if d, ok := u.untilNextRelease(); ok {
			due = time.After(d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			u.Tick()
			continue
		case <-due:
			u.Tick()
			continue
		case <-u.kick:
		}
		// Gather the batch.
		t := time.NewTimer(u.window + backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if err := u.Flush(); err != nil {
			// A full or read-only disk: what is served stays (it is in
			// memory), the db is reported degraded, and the batch waits.
			backoff = min(max(2*backoff, time.Second), 30*time.Second)
			u.log.Error("commit failed; keeping the stored zones and retrying", "err", err, "retry_in", backoff.String())
			u.ReportFeed(StoreFeed, err)
			u.wake()
			continue
		}
		if backoff > 0 {
			u.ReportFeed(StoreFeed, nil)
		}
		backoff = 0
	}
}

// Flush computes and commits everything pending now, as one change set.
// VMs whose records and decision did not change (their hash matches the
// stored one) are settled without touching the store, so a restart's
// reconcile of an unchanged data center writes nothing.
func (u *Updater) Flush() error {
	u.mu.Lock()
	if len(u.dirty) == 0 && !u.zonesDirty && len(u.health.dirty) == 0 && len(u.sources) == 0 {
		u.mu.Unlock()
		return nil
	}
	cs := &db.ChangeSet{Cause: u.causeSummary()}
	if u.zonesDirty {
		z := u.zones
		cs.Zones = &z
	}
	// A very large batch (a first start, a config change) is committed in
	// chunks of changed VMs: each chunk is consistent, and the write
	// transaction's memory stays bounded.
	batch := map[string]uint64{}
	unchanged := 0
	for _, uuid := range slices.Sorted(maps.Keys(u.dirty)) {
		if len(cs.VMs) == maxVMsPerCommit {
			break
		}
		gen := u.dirty[uuid]
		vc, ok := u.change(uuid)
		switch {
		case !ok:
			delete(u.dirty, uuid) // cannot be computed now; its records stay
		case !vc.Delete && vc.Hash == u.hashes[uuid]:
			delete(u.dirty, uuid)
			unchanged++
		default:
			batch[uuid] = gen
			cs.VMs = append(cs.VMs, vc)
		}
	}
	nSources := u.takeSources(cs)
	var healthGens map[string]uint64
	cs.Hysteresis, healthGens = u.health.writes()
	u.burst += len(cs.VMs) + unchanged
	if len(cs.VMs) == 0 && cs.Zones == nil && len(cs.Hysteresis) == 0 && len(cs.Sources) == 0 {
		clear(u.causes)
		u.log.Info("committed", "vms", 0, "unchanged", unchanged, "zones", 0, "pending", u.pending(), "took", "0s")
		release := u.endOfBurst()
		u.mu.Unlock()
		if release {
			u.releaseMemory()
		}
		return nil
	}
	u.mu.Unlock()

	start := time.Now()
	res, err := u.store.Commit(cs)

	u.mu.Lock()
	defer u.mu.Unlock()
	u.lastCommit = CommitInfo{Time: u.now(), VMs: len(cs.VMs), Duration: time.Since(start)}
	if err != nil {
		u.lastCommit.Err = err.Error()
		return err
	}
	u.commits++
	u.hist.observe(u.lastCommit.Duration.Seconds())
	u.health.written(healthGens)
	u.sourcesCommitted(nSources)
	if cs.Zones != nil {
		u.zonesDirty = false
	}
	for _, vc := range cs.VMs {
		// A VM marked again while we committed stays dirty.
		if u.dirty[vc.UUID] == batch[vc.UUID] {
			delete(u.dirty, vc.UUID)
		}
		if vc.Delete {
			delete(u.known, vc.UUID)
			delete(u.hashes, vc.UUID)
		} else {
			u.known[vc.UUID] = true
			u.hashes[vc.UUID] = vc.Hash
		}
	}
	if u.endOfBurst() {
		defer u.releaseMemory()
	}
	if len(u.dirty) > 0 || u.sourcesPending() {
		u.wake() // the rest of a chunked batch
	} else {
		clear(u.causes)
	}
	for _, p := range res.Problems {
		u.log.Warn(p)
	}
	u.log.Info("committed", "vms", len(cs.VMs), "unchanged", unchanged, "zones", len(res.Zones), "pending", u.pending(), "took", u.lastCommit.Duration.String())
	for _, z := range res.Zones {
		if z.Removed {
			u.log.Info("zone removed", "zone", z.Zone)
		} else {
			u.log.Info("zone updated", "zone", z.Zone, "serial", z.Serial, "names", len(z.Names), "cause", cs.Cause)
		}
	}
	return nil
}

// change builds the change of one VM. ok is false when the VM cannot be
// recomputed now (its owner is unknown): its stored records stay.
func (u *Updater) change(uuid string) (db.VMChange, bool) {
	stored := u.vms[uuid]
	if stored == nil {
		u.leaveServices(uuid)
		return db.VMChange{UUID: uuid, Delete: true}, u.known[uuid]
	}
	vm, err := stored.vm()
	if err != nil {
		u.log.Error("stored vm facts unreadable; keeping its records", "vm", uuid, "err", err)
		return db.VMChange{}, false
	}
	owner := u.users[vm.OwnerUUID]
	if owner == nil {
		owner = u.logins[vm.OwnerUUID]
	}
	if owner == nil {
		u.log.Warn("owner unknown; keeping the VM's records", "vm", uuid, "owner", vm.OwnerUUID)
		return db.VMChange{}, false
	}
	cnDown := false
	if f := u.servers[vm.ServerUUID]; f != nil {
		cnDown = f.down
	}
	res := u.computeListing(records.Input{VM: vm, Owner: owner, CNDown: cnDown})
	m := newVMMeta(vm, owner, cnDown, &res, time.Time{})
	timeless, err := json.Marshal(m) // what the hash covers: the decision, not when it was made
	if err != nil {
		timeless = nil
	}
	m.Updated = u.now().UTC()
	meta, err := json.Marshal(m)
	if err != nil {
		meta = nil
	}
	vc := db.VMChange{UUID: uuid, Meta: meta, Records: make([]db.Record, 0, len(res.Records))}
	for _, r := range res.Records {
		vc.Records = append(vc.Records, db.Record{Zone: r.Zone, RR: r.RR, Pref: r.Pref, Stamp: r.Stamp})
	}
	vc.Hash = changeHash(timeless, vc.Records)
	if len(res.Problems) > 0 {
		u.log.Info("vm input problems", "vm", uuid, "problems", res.Problems)
	}
	// The reference updater's debug line, field for field (operators grep
	// for it): why, list services, list instance, services, records.
	u.log.Debug("updating vm", "vm", uuid, "why", res.Reasons, "l_s", res.ListServices, "l_i", res.ListInstance,
		"svcs", len(res.Services), "c", len(vc.Records))
	return vc, true
}

// causeSummary describes the pending batch in one line.
func (u *Updater) causeSummary() string {
	s := strings.Join(slices.Sorted(maps.Keys(u.causes)), "; ")
	if n := len(u.dirty); n > 0 {
		s = fmt.Sprintf("%s (%d VMs)", s, n)
	}
	return s
}

// Pending returns how many VMs (and aggregated pseudo-VMs) wait for the
// next commit.
func (u *Updater) Pending() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.pending()
}

// LastCommit describes the last commit attempt.
func (u *Updater) LastCommit() CommitInfo {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lastCommit
}

func (u *Updater) world() *records.World {
	return &records.World{Networks: u.networks, Pools: u.pools, PoolNetworks: u.poolNets}
}

// ErrUnknownOwner is returned by Suffixes for an account nobody has seen.
var ErrUnknownOwner = errors.New("owner not found")

// Suffixes answers CloudAPI's question before it provisions a VM: which
// DNS suffixes the VM of owner (UUID or login) on networks (network or
// pool UUIDs) will get.
func (u *Updater) Suffixes(owner string, networks []string) ([]string, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	usr := u.users[strings.ToLower(owner)]
	if usr == nil {
		usr = u.logins[owner]
	}
	if usr == nil {
		return nil, ErrUnknownOwner
	}
	return records.Suffixes(&u.cfg, u.world(), usr, networks), nil
}

// Histogram is a Prometheus-style histogram of commit durations.
type Histogram struct {
	Bounds []float64 // upper bounds, seconds
	Counts []uint64  // cumulative counts per bound
	Count  uint64
	Sum    float64
}

var commitBounds = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

func (h *Histogram) observe(v float64) {
	if h.Bounds == nil {
		h.Bounds = commitBounds
		h.Counts = make([]uint64, len(commitBounds))
	}
	for i, b := range h.Bounds {
		if v <= b {
			h.Counts[i]++
		}
	}
	h.Count++
	h.Sum += v
}

// CommitHistogram returns the commit durations so far.
func (u *Updater) CommitHistogram() Histogram {
	u.mu.Lock()
	defer u.mu.Unlock()
	h := u.hist
	if h.Bounds == nil {
		h.Bounds = commitBounds
		h.Counts = make([]uint64, len(commitBounds))
	}
	h.Counts = slices.Clone(h.Counts)
	return h
}

// changeHash identifies a VM's computed state: its decision (meta
// without the time it was made) and its records in wire form. Equal
// hashes mean nothing to commit.
func changeHash(meta []byte, recs []db.Record) uint64 {
	h := fnv.New64a()
	h.Write(meta)
	buf := make([]byte, 512)
	for _, r := range recs {
		h.Write([]byte(r.Zone))
		h.Write([]byte{0, r.Pref})
		if r.Stamp != 0 {
			h.Write(binary.BigEndian.AppendUint64(nil, r.Stamp))
		}
		if n, err := dns.PackRR(r.RR, buf, 0, nil, false); err == nil {
			h.Write(buf[:n])
		} else {
			h.Write([]byte(r.RR.String()))
		}
	}
	return h.Sum64() | 1 // never 0, which means "no hash"
}

// bigBurst is the number of VMs computed in one go (a start, a full
// listing, a config change) after which memory is handed back.
const bigBurst = 10000

// endOfBurst reports, once the dirty set is empty, whether the burst that
// emptied it was big. Callers hold mu.
func (u *Updater) endOfBurst() bool {
	if len(u.dirty) > 0 || u.sourcesPending() {
		return false
	}
	big := u.burst >= bigBurst
	u.burst = 0
	return big
}

// releaseMemory gives the transient memory of a big load back to the
// system now, not over minutes: the Go heap's free pages, and the pages
// of the db file the load read.
func (u *Updater) releaseMemory() {
	debug.FreeOSMemory()
	if err := u.store.ReleaseMemory(); err != nil {
		u.log.Debug("release db pages", "err", err)
	}
}
