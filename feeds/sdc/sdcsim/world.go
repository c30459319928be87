package sdcsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// The world is the one mutable data center behind every simulated service.
// Its state lives on Sim, guarded by Sim.mu; every mutation below takes the
// lock, changes the state and, like the real services, emits what a change
// of that kind emits: a changefeed item for VMs (VMAPI's putVm), a changelog
// entry for users (UFDS), nothing for servers, networks and pools (CNAPI and
// NAPI have no feed; consumers poll them).

// ErrNotFound is returned by mutations naming an object the world lacks.
var ErrNotFound = errors.New("sdcsim: not found")

// ErrExists is returned when creating an object whose uuid is taken.
var ErrExists = errors.New("sdcsim: already exists")

func isoTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func (s *Sim) stamp() string { return isoTime(s.now()) }

// load replaces the world with an inventory, emitting nothing: it is the
// state VMAPI, CNAPI, NAPI and UFDS had before anyone listened.
func (s *Sim) load(inv dc.Inventory) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.stamp()
	s.vms = make(map[string]*vmRecord, len(inv.VMs))
	s.vmOrder = nil
	s.vmGen++
	for _, vm := range inv.VMs {
		if err := checkVM(&vm); err != nil {
			return err
		}
		vm = copyVM(vm)
		normalizeVM(&vm, now)
		s.vms[vm.UUID] = newVMRecord(vm)
	}
	s.servers = make(map[string]dc.Server, len(inv.Servers))
	for _, srv := range inv.Servers {
		s.servers[srv.UUID] = copyServer(srv)
	}
	s.users = make(map[string]*userEntry, len(inv.Users))
	s.userOrder = nil
	for _, u := range inv.Users {
		s.users[u.UUID] = newUserEntry(u)
		s.userOrder = append(s.userOrder, u.UUID)
	}
	s.networks = make(map[string]dc.Network, len(inv.Networks))
	for _, n := range inv.Networks {
		s.networks[n.UUID] = n
	}
	s.pools = make(map[string]dc.NetworkPool, len(inv.NetworkPools))
	for _, p := range inv.NetworkPools {
		s.pools[p.UUID] = p
	}
	return nil
}

// checkVM rejects a VM that cannot be put on the wire (a tag or metadata
// value JSON cannot encode). The world only ever holds VMs that pass, which
// is why rendering and copying treat an encoding failure as a bug.
func checkVM(vm *dc.VM) error {
	if _, err := json.Marshal(vm); err != nil {
		return fmt.Errorf("sdcsim: VM %s cannot be encoded: %w", vm.UUID, err)
	}
	return nil
}

// Inventory returns a snapshot of the whole world in the inventory format.
func (s *Sim) Inventory() dc.Inventory {
	s.mu.Lock()
	defer s.mu.Unlock()
	var inv dc.Inventory
	for _, u := range s.sortedVMs(false) {
		inv.VMs = append(inv.VMs, copyVM(s.vms[u].vm))
	}
	for _, k := range slices.Sorted(maps.Keys(s.servers)) {
		inv.Servers = append(inv.Servers, copyServer(s.servers[k]))
	}
	for _, u := range s.userOrder {
		inv.Users = append(inv.Users, s.users[u].user())
	}
	for _, k := range slices.Sorted(maps.Keys(s.networks)) {
		inv.Networks = append(inv.Networks, s.networks[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.pools)) {
		inv.NetworkPools = append(inv.NetworkPools, s.pools[k])
	}
	return inv
}

// sortedVMs returns the VM uuids in VMAPI's default order, uuid DESC
// (desc=true), or ascending. The descending order is cached until the set
// of VMs changes. Callers hold s.mu.
func (s *Sim) sortedVMs(desc bool) []string {
	if s.vmOrder == nil {
		s.vmOrder = make([]string, 0, len(s.vms))
		for u := range s.vms {
			s.vmOrder = append(s.vmOrder, u)
		}
		sort.Slice(s.vmOrder, func(i, j int) bool {
			return strings.ToLower(s.vmOrder[i]) > strings.ToLower(s.vmOrder[j])
		})
	}
	if desc {
		return s.vmOrder
	}
	asc := slices.Clone(s.vmOrder)
	slices.Reverse(asc)
	return asc
}

// ---- VMs ----

// VM returns a copy of one VM, destroyed ones included.
func (s *Sim) VM(uuid string) (dc.VM, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.vms[uuid]
	if !ok {
		return dc.VM{}, false
	}
	return copyVM(r.vm), true
}

// CreateVM adds a VM and publishes its creation: VMAPI diffs the new object
// against {}, so every top-level key appears once in subResources.
func (s *Sim) CreateVM(vm dc.VM) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.createVMLocked(vm)
}

func (s *Sim) createVMLocked(vm dc.VM) error {
	if !dc.IsUUID(vm.UUID) {
		return fmt.Errorf("sdcsim: create VM: uuid %q is not a UUID", vm.UUID)
	}
	if _, ok := s.vms[vm.UUID]; ok {
		return fmt.Errorf("create VM %s: %w", vm.UUID, ErrExists)
	}
	if err := checkVM(&vm); err != nil {
		return err
	}
	vm = copyVM(vm)
	normalizeVM(&vm, s.stamp())
	r := newVMRecord(vm)
	s.vms[vm.UUID] = r
	s.vmOrder = nil
	s.vmGen++
	s.publishVMLocked(vm.UUID, changedKeys(map[string]any{}, r.doc), r.wire)
	return nil
}

// PutVM creates the VM or replaces it whole, publishing the difference.
// A replacement that leaves last_modified as it was gets it bumped, as any
// VMAPI write does.
func (s *Sim) PutVM(vm dc.VM) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.vms[vm.UUID]; !ok {
		return s.createVMLocked(vm)
	}
	if err := checkVM(&vm); err != nil {
		return err
	}
	return s.modifyVMLocked(vm.UUID, func(cur *dc.VM) {
		c := copyVM(vm)
		// An inventory without timestamps keeps the stored ones, so that
		// last_modified never goes backwards.
		if c.CreateTimestamp == "" {
			c.CreateTimestamp = cur.CreateTimestamp
		}
		if c.LastModified == "" {
			c.LastModified = cur.LastModified
		}
		*cur = c
	})
}

// ModifyVM applies fn to a copy of the VM and stores the result, publishing
// the changed top-level keys. fn must not change the uuid. When fn changes
// something but not last_modified, last_modified is set to now, so it shows
// in subResources as it does with VMAPI. A no-op fn publishes nothing.
func (s *Sim) ModifyVM(uuid string, fn func(vm *dc.VM)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.modifyVMLocked(uuid, fn)
}

func (s *Sim) modifyVMLocked(uuid string, fn func(vm *dc.VM)) error {
	old, ok := s.vms[uuid]
	if !ok {
		return fmt.Errorf("modify VM %s: %w", uuid, ErrNotFound)
	}
	vm := copyVM(old.vm)
	fn(&vm)
	if vm.UUID != uuid {
		return fmt.Errorf("sdcsim: modify VM %s: the uuid cannot change (got %q)", uuid, vm.UUID)
	}
	if err := checkVM(&vm); err != nil {
		return err
	}
	normalizeVM(&vm, s.stamp())
	r := newVMRecord(vm)
	if diffCount(old.doc, r.doc) == 0 {
		return nil
	}
	if vm.LastModified == old.vm.LastModified {
		vm.LastModified = s.stamp()
		r = newVMRecord(vm)
	}
	s.vms[uuid] = r
	s.vmGen++
	s.publishVMLocked(uuid, changedKeys(old.doc, r.doc), r.wire)
	return nil
}

// ModifyVMsOnServer applies fn to every VM on a CN that is not destroyed,
// one changefeed item per VM changed: the burst a CN reboot produces. It
// returns how many VMs changed.
func (s *Sim) ModifyVMsOnServer(serverUUID string, fn func(vm *dc.VM)) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, u := range s.sortedVMs(true) {
		old := s.vms[u]
		if old.vm.ServerUUID != serverUUID || old.vm.State == "destroyed" {
			continue
		}
		if err := s.modifyVMLocked(u, fn); err != nil {
			return n, err
		}
		if s.vms[u] != old {
			n++
		}
	}
	return n, nil
}

// SetVMState sets state and the matching zone_state; "destroyed" also sets
// the destroyed timestamp.
func (s *Sim) SetVMState(uuid, state string) error {
	if state == "destroyed" {
		return s.DestroyVM(uuid)
	}
	return s.ModifyVM(uuid, func(vm *dc.VM) {
		vm.State = state
		if zs := zoneStateFor(state); zs != "" {
			vm.ZoneState = zs
		}
	})
}

// StopVM is SetVMState(uuid, "stopped").
func (s *Sim) StopVM(uuid string) error { return s.SetVMState(uuid, "stopped") }

// StartVM is SetVMState(uuid, "running").
func (s *Sim) StartVM(uuid string) error { return s.SetVMState(uuid, "running") }

// DestroyVM marks the VM destroyed (state, zone_state and the destroyed
// timestamp). VMAPI keeps destroyed VMs: GET /vms/:uuid still returns them.
func (s *Sim) DestroyVM(uuid string) error {
	now := s.stamp()
	return s.ModifyVM(uuid, func(vm *dc.VM) {
		vm.State = "destroyed"
		vm.ZoneState = "installed"
		if !vm.Destroyed.Set || vm.Destroyed.Time == "" {
			vm.Destroyed = dc.Destroyed{Set: true, Time: now}
		}
	})
}

// PurgeVM deletes a VM outright without publishing anything, like a hard
// delete in moray: GET /vms/:uuid answers 404 from then on. With
// PublishChange it reproduces "an event for a VM that 404s".
func (s *Sim) PurgeVM(uuid string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.vms[uuid]; !ok {
		return fmt.Errorf("purge VM %s: %w", uuid, ErrNotFound)
	}
	delete(s.vms, uuid)
	s.vmOrder = nil
	s.vmGen++
	return nil
}

// SetTag sets one tag (value: string, number or bool, as VMAPI stores it).
func (s *Sim) SetTag(uuid, key string, value any) error {
	return s.ModifyVM(uuid, func(vm *dc.VM) { vm.Tags[key] = value })
}

// DeleteTag removes one tag.
func (s *Sim) DeleteTag(uuid, key string) error {
	return s.ModifyVM(uuid, func(vm *dc.VM) { delete(vm.Tags, key) })
}

// SetMetadata sets one customer_metadata key.
func (s *Sim) SetMetadata(uuid, key string, value any) error {
	return s.ModifyVM(uuid, func(vm *dc.VM) { vm.CustomerMetadata[key] = value })
}

// DeleteMetadata removes one customer_metadata key.
func (s *Sim) DeleteMetadata(uuid, key string) error {
	return s.ModifyVM(uuid, func(vm *dc.VM) { delete(vm.CustomerMetadata, key) })
}

// SetAlias sets the alias; "" makes it null.
func (s *Sim) SetAlias(uuid, alias string) error {
	return s.ModifyVM(uuid, func(vm *dc.VM) {
		if alias == "" {
			vm.Alias = nil
		} else {
			vm.Alias = &alias
		}
	})
}

// SetNICs replaces the VM's NICs (one "nics" subResource per changed field).
func (s *Sim) SetNICs(uuid string, nics []dc.NIC) error {
	return s.ModifyVM(uuid, func(vm *dc.VM) { vm.NICs = slices.Clone(nics) })
}

// PublishChange publishes a raw VM change item, whatever the world holds:
// for events about VMs that do not exist, or with odd subResources.
func (s *Sim) PublishChange(uuid string, subResources ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var wire []byte
	if r, ok := s.vms[uuid]; ok {
		wire = r.wire
	}
	s.publishVMLocked(uuid, subResources, wire)
}

func (s *Sim) publishVMLocked(uuid string, keys []string, wire []byte) {
	s.feed.publish(uuid, keys, wire)
}

// ---- servers (CNAPI) ----

func copyServer(srv dc.Server) dc.Server {
	if srv.LastHeartbeat != nil {
		hb := *srv.LastHeartbeat
		srv.LastHeartbeat = &hb
	}
	if srv.Sysinfo != nil {
		srv.Sysinfo = maps.Clone(srv.Sysinfo)
	}
	return srv
}

// Server returns a copy of one CNAPI server.
func (s *Sim) Server(uuid string) (dc.Server, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, ok := s.servers[uuid]
	return copyServer(srv), ok
}

// PutServer adds or replaces a server. CNAPI has no feed: consumers see the
// change on their next GET /servers.
func (s *Sim) PutServer(srv dc.Server) error {
	if !dc.IsUUID(srv.UUID) {
		return fmt.Errorf("sdcsim: put server: uuid %q is not a UUID", srv.UUID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servers[srv.UUID] = copyServer(srv)
	return nil
}

// ModifyServer applies fn to a copy of the server and stores it.
func (s *Sim) ModifyServer(uuid string, fn func(srv *dc.Server)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, ok := s.servers[uuid]
	if !ok {
		return fmt.Errorf("modify server %s: %w", uuid, ErrNotFound)
	}
	srv = copyServer(srv)
	fn(&srv)
	srv.UUID = uuid
	s.servers[uuid] = srv
	return nil
}

// RemoveServer deletes a server from CNAPI.
func (s *Sim) RemoveServer(uuid string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.servers[uuid]; !ok {
		return fmt.Errorf("remove server %s: %w", uuid, ErrNotFound)
	}
	delete(s.servers, uuid)
	return nil
}

// ServerDown makes a CN look dead the way CNAPI shows it: status "unknown"
// and a last heartbeat two hours old, past the one hour CNS waits before it
// calls a non-running CN down. VMs on it keep their state, as in VMAPI with
// the default server_state_affects_vm_state=false.
func (s *Sim) ServerDown(uuid string) error {
	hb := isoTime(s.now().Add(-2 * time.Hour))
	return s.ModifyServer(uuid, func(srv *dc.Server) {
		srv.Status = "unknown"
		srv.TransitionalStatus = ""
		srv.LastHeartbeat = &hb
	})
}

// ServerUp brings a CN back as after a reboot: status "running", a fresh
// heartbeat, and last_boot now (CNS treats a boot under 2 min ago as down).
func (s *Sim) ServerUp(uuid string) error {
	now := s.stamp()
	return s.ModifyServer(uuid, func(srv *dc.Server) {
		srv.Status = "running"
		srv.TransitionalStatus = ""
		srv.LastHeartbeat = &now
		srv.LastBoot = now
	})
}

// ---- networks and pools (NAPI) ----

// PutNetwork adds or replaces a NAPI network.
func (s *Sim) PutNetwork(n dc.Network) error {
	if !dc.IsUUID(n.UUID) {
		return fmt.Errorf("sdcsim: put network: uuid %q is not a UUID", n.UUID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n.OwnerUUIDs = slices.Clone(n.OwnerUUIDs)
	s.networks[n.UUID] = n
	return nil
}

// RemoveNetwork deletes a NAPI network (pools keep naming it, as NAPI lets
// them until they are updated).
func (s *Sim) RemoveNetwork(uuid string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.networks[uuid]; !ok {
		return fmt.Errorf("remove network %s: %w", uuid, ErrNotFound)
	}
	delete(s.networks, uuid)
	return nil
}

// PutNetworkPool adds or replaces a NAPI network pool.
func (s *Sim) PutNetworkPool(p dc.NetworkPool) error {
	if !dc.IsUUID(p.UUID) {
		return fmt.Errorf("sdcsim: put network pool: uuid %q is not a UUID", p.UUID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Networks = slices.Clone(p.Networks)
	p.OwnerUUIDs = slices.Clone(p.OwnerUUIDs)
	s.pools[p.UUID] = p
	return nil
}

// RemoveNetworkPool deletes a NAPI network pool.
func (s *Sim) RemoveNetworkPool(uuid string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pools[uuid]; !ok {
		return fmt.Errorf("remove network pool %s: %w", uuid, ErrNotFound)
	}
	delete(s.pools, uuid)
	return nil
}

// ---- users (UFDS) ----

// userEntry is an sdcperson entry: attribute name (lower case) to values.
// UFDS stores any attribute; values are strings.
type userEntry struct {
	attrs map[string][]string
	// entry caches the LDAP form of attrs; any change to attrs clears it.
	entry *ldapEntry
}

func newUserEntry(u dc.User) *userEntry {
	e := &userEntry{attrs: map[string][]string{
		"objectclass": {"sdcperson"},
		"uuid":        {u.UUID},
		"login":       {u.Login},
		// sdcperson requires an email; inventories do not carry one.
		"email": {u.Login + "@sdcsim.invalid"},
	}}
	if u.TritonCNSEnabled != "" {
		e.attrs["triton_cns_enabled"] = []string{u.TritonCNSEnabled}
	}
	if u.ApprovedForProvisioning != "" {
		e.attrs["approved_for_provisioning"] = []string{u.ApprovedForProvisioning}
	}
	return e
}

func (e *userEntry) first(attr string) string {
	if v := e.attrs[attr]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (e *userEntry) user() dc.User {
	return dc.User{
		UUID:                    e.first("uuid"),
		Login:                   e.first("login"),
		TritonCNSEnabled:        e.first("triton_cns_enabled"),
		ApprovedForProvisioning: e.first("approved_for_provisioning"),
	}
}

func (e *userEntry) dn() string { return userDN(e.first("uuid")) }

// userDN is the account's DN as UFDS writes it, with ", " separators.
func userDN(uuid string) string { return "uuid=" + uuid + ", ou=users, o=smartdc" }

// jsonObject is the entry as ldapjs serializes it: attribute to values.
func (e *userEntry) jsonObject() string {
	b, _ := json.Marshal(e.attrs)
	return string(b)
}

// User returns one UFDS account.
func (s *Sim) User(uuid string) (dc.User, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.users[uuid]
	if !ok {
		return dc.User{}, false
	}
	return e.user(), true
}

// AddUser adds an account and appends an "add" changelog entry. A login
// already used is allowed, to reproduce UFDS answering two entries.
func (s *Sim) AddUser(u dc.User) error {
	if !dc.IsUUID(u.UUID) {
		return fmt.Errorf("sdcsim: add user: uuid %q is not a UUID", u.UUID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[u.UUID]; ok {
		return fmt.Errorf("add user %s: %w", u.UUID, ErrExists)
	}
	e := newUserEntry(u)
	s.users[u.UUID] = e
	s.userOrder = append(s.userOrder, u.UUID)
	s.appendChangeLocked(ChangelogEntry{TargetDN: e.dn(), ChangeType: "add", Changes: e.jsonObject()})
	return nil
}

// SetUserAttrs replaces attributes of an account (an empty value deletes
// the attribute) and appends one "modify" changelog entry listing every
// change in ldapjs form, as UFDS does for an ldapmodify.
func (s *Sim) SetUserAttrs(uuid string, attrs map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.users[uuid]
	if !ok {
		return fmt.Errorf("modify user %s: %w", uuid, ErrNotFound)
	}
	type modification struct {
		Type string   `json:"type"`
		Vals []string `json:"vals"`
	}
	type change struct {
		Operation    string       `json:"operation"`
		Modification modification `json:"modification"`
	}
	var changes []change
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		attr := strings.ToLower(name)
		if attr == "uuid" {
			return fmt.Errorf("sdcsim: modify user %s: uuid cannot change", uuid)
		}
		e.entry = nil
		if v := attrs[name]; v != "" {
			e.attrs[attr] = []string{v}
			changes = append(changes, change{"replace", modification{attr, []string{v}}})
		} else if _, had := e.attrs[attr]; had {
			delete(e.attrs, attr)
			changes = append(changes, change{"delete", modification{attr, []string{}}})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	b, _ := json.Marshal(changes)
	s.appendChangeLocked(ChangelogEntry{
		TargetDN: e.dn(), ChangeType: "modify", Changes: string(b), Entry: e.jsonObject(),
	})
	return nil
}

// SetUserFlag sets triton_cns_enabled or approved_for_provisioning (or any
// attribute) to value, "" deleting it.
func (s *Sim) SetUserFlag(uuid, attr, value string) error {
	return s.SetUserAttrs(uuid, map[string]string{attr: value})
}

// RemoveUser deletes an account and appends a "delete" changelog entry.
func (s *Sim) RemoveUser(uuid string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.users[uuid]
	if !ok {
		return fmt.Errorf("remove user %s: %w", uuid, ErrNotFound)
	}
	delete(s.users, uuid)
	s.userOrder = slices.DeleteFunc(s.userOrder, func(u string) bool { return u == uuid })
	s.appendChangeLocked(ChangelogEntry{TargetDN: e.dn(), ChangeType: "delete", Changes: e.jsonObject()})
	return nil
}

// ChangelogEntry is one UFDS changelog entry. Number and ChangeTime are
// assigned when it is appended.
type ChangelogEntry struct {
	Number     int
	TargetDN   string // e.g. "uuid=<u>, ou=users, o=smartdc"
	ChangeType string // add, modify or delete
	ChangeTime string // ISO-8601
	Changes    string // JSON, ldapjs form
	Entry      string // JSON of the entry after a modify, else ""
}

// AppendChangelog appends an arbitrary entry, for entries about sub-users,
// keys or other subtrees that a watcher must skip. It returns the number.
func (s *Sim) AppendChangelog(e ChangelogEntry) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appendChangeLocked(e)
}

func (s *Sim) appendChangeLocked(e ChangelogEntry) int {
	s.nextChange++
	e.Number = s.nextChange
	if e.ChangeTime == "" {
		e.ChangeTime = s.stamp()
	}
	s.changelog = append(s.changelog, e)
	return e.Number
}

// SetChangeNumber makes the next changelog entry get number n+1, to test a
// digit rollover or the non-dense numbering of moray _ids. n must not be
// below the latest number.
func (s *Sim) SetChangeNumber(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < s.nextChange {
		return fmt.Errorf("sdcsim: change number %d is below the latest, %d", n, s.nextChange)
	}
	s.nextChange = n
	return nil
}

// LatestChangeNumber is what cn=latestchangenumber answers as count.
func (s *Sim) LatestChangeNumber() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latestChangeLocked()
}

func (s *Sim) latestChangeLocked() int {
	if len(s.changelog) == 0 {
		return 0
	}
	return s.changelog[len(s.changelog)-1].Number
}
