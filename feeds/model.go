package feeds

import (
	"bytes"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/guard"
	"github.com/tritondatacenter/cns/feeds/records"
)

// model is the data center as the feeds last described it, held once,
// and the indexes over it. Its setters return what they touched (the VMs
// to recompute); the updater marks those (u.mu is held throughout).
type model struct {
	users    map[string]*dc.User     // by uuid
	logins   map[string]*dc.User     // by login
	servers  map[string]*serverFacts // by uuid
	networks map[string]*dc.Network  // by uuid
	pools    map[string][]string     // network uuid → pool uuids
	poolNets map[string][]string     // pool uuid → network uuids
	poolList []dc.NetworkPool        // as last given, to notice changes
	vms      map[string]*storedVM    // by uuid: what records reads, encoded
	strs     map[string]string       // interned owner and server UUIDs
	// overtakes versions the inputs: changes since a listing began.
	overtakes overtakes
	haveFull  bool // a full listing has been applied
	// listing: a listing is being put (SetInventory, between its slices):
	// no batch is computed.
	listing bool
}

func newModel() model {
	return model{
		users: map[string]*dc.User{}, logins: map[string]*dc.User{},
		servers: map[string]*serverFacts{}, networks: map[string]*dc.Network{}, pools: map[string][]string{},
		vms: map[string]*storedVM{}, strs: map[string]string{},
	}
}

// serverFacts is a CN and the state cns concluded for it.
type serverFacts struct {
	server dc.Server
	state  dc.CNState
	down   bool // the effective decision (unknown keeps the previous one)
	seen   lastSeen
}

// vmsWhere returns the VMs whose owner or server (the interned UUIDs of
// storedVM, key) is in keys. The model keeps no index of them: a user or
// a compute node changes rarely, and a look through a million VMs takes
// ~30 ms, where the two indexes took ~100 bytes a VM.
func (m *model) vmsWhere(keys map[string]bool, key func(v *storedVM) string) map[string]bool {
	if len(keys) == 0 {
		return nil
	}
	out := map[string]bool{}
	for id, v := range m.vms {
		if keys[key(v)] {
			out[id] = true
		}
	}
	return out
}

func vmOwner(v *storedVM) string  { return v.owner }
func vmServer(v *storedVM) string { return v.server }

// SetVM records the current state of one VM (from a changefeed event or
// a targeted listing). A destroyed VM stays known, listed as destroyed.
func (u *Updater) SetVM(vm *dc.VM, cause string) {
	f := factsOf(vm)
	u.lock()
	defer u.mu.Unlock()
	u.overtakes.changed(f.uuid, f.modified, false)
	u.putVM(f, cause)
	u.wake()
}

// RemoveVM forgets a VM that the data center confirms is gone.
func (u *Updater) RemoveVM(uuid, cause string) {
	u.lock()
	defer u.mu.Unlock()
	uuid = strings.ToLower(uuid)
	u.overtakes.changed(uuid, modifiedUnknown, true)
	delete(u.guard.unlisted, uuid) // confirmed
	u.removeVM(uuid, cause)
	if u.stored(uuid) {
		u.mark(uuid)
	}
	u.wake()
}

// SetUser records one account (a UFDS lookup or changelog entry).
func (u *Updater) SetUser(usr dc.User, cause string) {
	u.lock()
	defer u.mu.Unlock()
	users := make([]dc.User, 0, len(u.users)+1)
	for _, x := range u.users {
		if x.UUID != strings.ToLower(usr.UUID) {
			users = append(users, *x)
		}
	}
	u.setUsers(append(users, usr), cause)
	u.upstreamAnswered(guard.OwnerOff)
	u.wake()
}

// SetServers replaces the compute nodes (a CNAPI listing).
func (u *Updater) SetServers(servers []dc.Server, cause string) {
	u.lock()
	defer u.mu.Unlock()
	u.setServers(servers, cause)
	u.sawServers(u.now())
	u.upstreamAnswered(guard.CNDown)
	u.wake()
}

// SetNetworks replaces the networks and pools (NAPI listings).
func (u *Updater) SetNetworks(nets []dc.Network, pools []dc.NetworkPool, cause string) {
	u.lock()
	defer u.mu.Unlock()
	u.setNetworks(nets, pools, cause)
	u.wake()
}

// VMUUIDs returns the UUIDs of the VMs the updater knows of, in memory or
// in the store; not the compute nodes' entries.
func (u *Updater) VMUUIDs() []string {
	u.lock()
	defer u.mu.Unlock()
	set := make(map[string]bool, len(u.hashes)+len(u.vms))
	for id := range u.hashes {
		set[id] = true
	}
	for id := range u.vms {
		set[id] = true
	}
	for id := range u.servers {
		if u.vms[id] == nil {
			delete(set, id)
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// markAll marks every VM and compute node for recomputation.
func (u *Updater) markAll(cause string) {
	for uuid := range u.vms {
		u.mark(uuid)
	}
	for uuid := range u.servers {
		u.mark(uuid) // CMON names follow the zones
	}
	u.causes[cause]++
}

// mark queues uuid for the next commit.
func (u *Updater) mark(uuid string) { u.sched.mark(uuid, mono()) }

func (u *Updater) markSet(set map[string]bool, cause string) {
	for uuid := range set {
		u.mark(uuid)
	}
	if len(set) > 0 {
		u.causes[cause]++
	}
}

// The updater's side of the model's setters: what they touched is marked
// for the next commit, with the cause. u.mu is held.

func (u *Updater) setUsers(users []dc.User, cause string) {
	u.markSet(u.model.setUsers(users), cause)
}

func (u *Updater) setNetworks(nets []dc.Network, pools []dc.NetworkPool, cause string) {
	if u.model.setNetworks(nets, pools) {
		u.markAll(cause)
	}
}

func (u *Updater) setServers(servers []dc.Server, cause string) {
	vms, cns := u.model.setServers(servers, u.now())
	u.markSet(vms, cause)
	for _, id := range cns {
		u.mark(id) // its CMON names, and what cnsadm vm says of it
		u.causes[cause]++
	}
}

// putVM records a VM's current state, and that a feed saw it now, and
// marks it when it changed.
func (u *Updater) putVM(f vmFacts, cause string) {
	if f.err != nil {
		u.log.Warn("vm not encodable; ignored", "vm", f.uuid, "err", f.err)
		return
	}
	v, changed := u.model.putVM(f)
	delete(u.guard.unlisted, f.uuid) // listed again
	u.saw(f.uuid, &v.seen, u.now())
	if changed {
		u.mark(f.uuid)
		u.causes[cause]++
	}
}

func (u *Updater) removeVM(uuid, cause string) {
	if u.model.removeVM(uuid) {
		u.mark(uuid)
		u.causes[cause]++
	}
}

// setUsers replaces the accounts and returns the VMs whose owner changed
// (by UUID, or by login: a CN's cmon VMs).
func (m *model) setUsers(users []dc.User) (touched map[string]bool) {
	next := make(map[string]*dc.User, len(users))
	for i := range users {
		usr := users[i]
		usr.UUID = strings.ToLower(usr.UUID)
		next[usr.UUID] = &usr
	}
	owners := map[string]bool{} // the owners (UUIDs and logins) whose VMs are touched
	for id, usr := range next {
		if old := m.users[id]; old == nil || *old != *usr {
			owners[id] = true
			if old != nil && old.Login != usr.Login {
				owners[old.Login] = true
			}
			owners[usr.Login] = true // VMs owned by login (CN cmon VMs)
		}
	}
	for id, old := range m.users {
		if next[id] == nil {
			owners[id], owners[old.Login] = true, true
		}
	}
	m.users = next
	m.logins = make(map[string]*dc.User, len(next))
	for _, usr := range next {
		m.logins[usr.Login] = usr
	}
	return m.vmsWhere(owners, vmOwner)
}

// setNetworks replaces the networks and pools and reports whether they
// changed: every VM's records may then change.
func (m *model) setNetworks(nets []dc.Network, pools []dc.NetworkPool) (changed bool) {
	next := make(map[string]*dc.Network, len(nets))
	for i := range nets {
		n := nets[i]
		next[strings.ToLower(n.UUID)] = &n
	}
	changed = len(next) != len(m.networks)
	for id, n := range next {
		if old := m.networks[id]; old == nil || !reflect.DeepEqual(old, n) {
			changed = true
		}
	}
	if !reflect.DeepEqual(pools, m.poolList) {
		changed = true
	}
	if !changed {
		return false
	}
	m.networks = next
	m.poolList = slices.Clone(pools)
	m.pools = map[string][]string{}
	m.poolNets = map[string][]string{}
	for _, p := range pools {
		for _, n := range p.Networks {
			m.poolNets[strings.ToLower(p.UUID)] = append(m.poolNets[strings.ToLower(p.UUID)], strings.ToLower(n))
		}
		for _, n := range p.Networks {
			m.pools[strings.ToLower(n)] = append(m.pools[strings.ToLower(n)], strings.ToLower(p.UUID))
		}
	}
	return true
}

// setServers replaces the compute nodes, their state judged at now, and
// returns the VMs on CNs whose down decision changed, and the CNs whose
// own entry (CMON names, what cnsadm vm says) changed.
func (m *model) setServers(servers []dc.Server, now time.Time) (vms map[string]bool, cns []string) {
	moved := map[string]bool{} // the CNs whose VMs are touched
	next := make(map[string]*serverFacts, len(servers))
	for i := range servers {
		s := servers[i]
		id := strings.ToLower(s.UUID)
		f := &serverFacts{server: s, state: dc.ServerState(&s, now)}
		old := m.servers[id]
		if old != nil {
			f.seen = old.seen
		}
		switch f.state {
		case dc.CNDown:
			f.down = true
		case dc.CNUnknown:
			f.down = old != nil && old.down
		}
		if old == nil || old.down != f.down {
			moved[id] = true
		}
		if old == nil || old.down != f.down || old.server.Setup != s.Setup || old.server.Hostname != s.Hostname {
			cns = append(cns, id)
		}
		next[id] = f
	}
	for id := range m.servers {
		if next[id] == nil {
			moved[id], cns = true, append(cns, id)
		}
	}
	m.servers = next
	return m.vmsWhere(moved, vmServer), cns
}

// Tick re-applies the time-dependent rules (a CN's heartbeat going stale,
// a recent boot settling). Run calls it periodically.
func (u *Updater) Tick() {
	u.lock()
	defer u.mu.Unlock()
	servers := make([]dc.Server, 0, len(u.servers))
	for _, f := range u.servers {
		servers = append(servers, f.server)
	}
	u.setServers(servers, "compute node state changed")
	u.releaseDue()
	u.advanceGuard()
	if u.sched.pending() > 0 {
		u.wake()
	}
}

// storedVM is one VM as the updater keeps it between changes: the facts
// records reads, encoded (encodeFacts: ~150 bytes, where the decoded
// object with its maps took about a kilobyte), and the UUIDs the indexes
// need. It is decoded again only when the VM is recomputed.
type storedVM struct {
	owner, server string
	facts         []byte
	seen          lastSeen
}

// vm decodes the stored facts.
func (v *storedVM) vm() (*dc.VM, error) { return decodeFacts(v.facts) }

// intern returns a shared copy of s: owner and server UUIDs repeat
// across VMs.
func (m *model) intern(s string) string {
	if v, ok := m.strs[s]; ok {
		return v
	}
	m.strs[s] = s
	return s
}

// vmFacts is what the updater keeps of a VM's state: the parts record
// generation reads (trimVM), encoded, and the keys it is indexed by.
// Computing it needs no lock, so a listing's are computed on every core.
type vmFacts struct {
	uuid, owner, server string
	facts               []byte
	modified            int64 // the VM's last_modified (overtakes, modifiedAt)
	err                 error // not encodable
}

func factsOf(vm *dc.VM) vmFacts {
	t := trimVM(vm)
	// The updater holds the facts of every VM: encoded on the stack, then
	// copied to their size (145 bytes on average where an encoding grown
	// by appending took 194).
	var scratch [512]byte
	facts, err := encodeFacts(scratch[:0], t)
	return vmFacts{uuid: t.UUID, owner: t.OwnerUUID, server: t.ServerUUID, facts: bytes.Clone(facts), modified: modifiedAt(vm.LastModified), err: err}
}

// putVM records a VM's current state, and returns it and whether it
// changed (its records are to be recomputed).
func (m *model) putVM(f vmFacts) (v *storedVM, changed bool) {
	old := m.vms[f.uuid]
	if old != nil && bytes.Equal(old.facts, f.facts) {
		return old, false
	}
	var seen lastSeen
	if old != nil {
		seen = old.seen
	}
	v = &storedVM{owner: m.intern(f.owner), server: m.intern(f.server), facts: f.facts, seen: seen}
	m.vms[f.uuid] = v
	return v, true
}

// removeVM forgets a VM and reports whether it was held.
func (m *model) removeVM(uuid string) bool {
	old := m.vms[uuid]
	if old == nil {
		return false
	}
	delete(m.vms, uuid)
	return true
}

// trimVM keeps what record generation reads, so memory stays small and
// irrelevant changes (memory, last_modified...) trigger nothing.
func trimVM(vm *dc.VM) *dc.VM {
	t := &dc.VM{
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
		t.NICs = append(t.NICs, dc.NIC{IP: n.IP, IPs: n.IPs, NetworkUUID: n.NetworkUUID, NICTag: n.NICTag, VLANID: n.VLANID})
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

// world is the networks and pools records reads.
func (m *model) world() *records.World {
	return &records.World{Networks: m.networks, Pools: m.pools, PoolNetworks: m.poolNets}
}

// Owner returns an account (by UUID or login) the model holds: the owner
// of a VM it holds, kept current by the feed.
func (u *Updater) Owner(owner string) (dc.User, bool) {
	u.lock()
	defer u.mu.Unlock()
	usr := u.users[strings.ToLower(owner)]
	if usr == nil {
		usr = u.logins[owner]
	}
	if usr == nil {
		return dc.User{}, false
	}
	return *usr, true
}

// KnowsNetwork reports whether the model holds id as a network or a
// network pool.
func (u *Updater) KnowsNetwork(id string) bool {
	u.lock()
	defer u.mu.Unlock()
	id = strings.ToLower(id)
	_, net := u.networks[id]
	_, pool := u.poolNets[id]
	return net || pool
}

// Suffixes answers CloudAPI's question before it provisions a VM: which
// DNS suffixes the VM of owner on networks (network or pool UUIDs) will
// get. pools adds network pools the model does not hold (created since
// NAPI was last polled).
func (u *Updater) Suffixes(owner dc.User, networks []string, pools []dc.NetworkPool) []string {
	u.lock()
	defer u.mu.Unlock()
	return records.Suffixes(&u.cfg, u.world().WithPools(pools), &owner, networks)
}
