package admin

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/hysteresis"
)

// The read model: zones, peers with their drift, propagation, services
// and VMs as an operator sees them. The parts of cns return their read
// shapes (admin/status); this file completes them (a peer's drift, a
// service's names) and turns what the store holds into the API's. It is
// computed here once and read from two sources: a running cns through its API (APIModel, whose server computes
// it with the functions below) and a db file, read-only (DBModel). The
// terminal UI and `cns db` print from it.

// ReadModel is where an operator's view reads from.
type ReadModel interface {
	// Describe names the source for a status line.
	Describe() string
	// Live reports whether the data changes on its own (a running
	// server), so a view refreshes it.
	Live() bool
	Zones(ctx context.Context) ([]Zone, error)
	History(ctx context.Context, zone string, limit int) ([]Change, error)
	Peers(ctx context.Context) ([]Peer, error)
	Services(ctx context.Context) ([]Service, error)
	SearchVMs(ctx context.Context, query string, limit int) (*VMSearch, error)
	VM(ctx context.Context, uuid string) (*VM, error)
	Feeds(ctx context.Context) (*Feeds, error)
}

// peerView completes a peer as the DNS server tracks it (DNS.PeerStatus,
// or a peer stored in the db) for the API: the default version, the derived
// flags, the counters the API shows, and per zone the serial served
// (zoneSerial; 0 for a zone not served) and the drift against it.
func peerView(store *db.DB, p Peer, zoneSerial func(zone string) uint32, now time.Time) Peer {
	out := Peer{Address: p.Address, Serials: map[string]uint32{}, Version: cmp.Or(p.Version, "unknown"),
		NotifyFailures: p.NotifyFailures, UsingNotify: p.State != status.PeerSilent, State: p.State, UsingIXFR: p.Counters["ixfr"] > 2*p.Counters["axfr"],
		Counters: map[string]uint64{}, Zones: map[string]PeerZone{}}
	for _, c := range []string{"soa", "axfr", "ixfr", "goodxfer"} {
		out.Counters[c] = p.Counters[c]
	}
	for z, pz := range p.Zones {
		out.Serials[z] = pz.Serial
		pz.ZoneSerial = zoneSerial(z)
		pz.DriftSerials, pz.DriftSeconds = drift(store, z, pz.Serial, pz.ZoneSerial, now)
		out.Zones[z] = pz
	}
	return out
}

// drift says how far behind a peer at serial `have` is: in commits, and
// in seconds since the first change it lacks (-1 when the journal no
// longer tells).
func drift(store *db.DB, zone string, have, cur uint32, now time.Time) (int64, float64) {
	if have == cur || cur == 0 {
		return 0, 0
	}
	entries, ok, err := store.Journal(zone, have)
	if err != nil || !ok || len(entries) == 0 {
		return int64(int32(cur - have)), -1
	}
	return int64(len(entries)), now.Sub(entries[0].Time).Seconds()
}

// zoneView is a stored zone, without the peers and propagation only a
// running server knows.
func zoneView(zi db.ZoneInfo) Zone {
	return Zone{Name: zi.Name, Serial: zi.Serial, Reverse: zi.Reverse, Names: zi.Names, Records: zi.Records,
		LastChange: zi.LastChange, Journal: Journal{From: zi.JournalFrom, Entries: zi.JournalEntries, Bytes: zi.JournalBytes},
		Peers: []ZonePeer{}}
}

// nameServices adds to svcs the names operators know them by: each
// owner's login and each VM's alias, read from the stored VMs in one
// transaction. A VM the store no longer holds keeps only its UUID.
func nameServices(store *db.DB, svcs []Service) error {
	var uuids []string
	for _, v := range svcs {
		for _, m := range v.Members {
			uuids = append(uuids, m.VM)
		}
		for _, d := range v.Departures {
			uuids = append(uuids, d.VM)
		}
		for _, d := range v.History {
			uuids = append(uuids, d.VM)
		}
	}
	if len(uuids) == 0 {
		return nil
	}
	// In UUID order, the reads walk the store's UUID-keyed index in order.
	slices.Sort(uuids)
	uuids = slices.Compact(uuids)
	type names struct{ alias, owner, login string }
	known := make(map[string]names, len(uuids))
	err := store.VMMetas(uuids, func(uuid string, meta []byte) error {
		if alias, owner, login, err := feeds.DecodeVMMetaNames(meta); err == nil {
			known[uuid] = names{alias, owner, login}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// VMMetas names a VM by its UUID in lower case, as cns stores it.
	of := func(vm string) names {
		n, ok := known[vm]
		if !ok {
			n = known[strings.ToLower(vm)]
		}
		return n
	}
	for i := range svcs {
		v := &svcs[i]
		for j := range v.Members {
			m := &v.Members[j]
			n := of(m.VM)
			m.Alias = n.alias
			if v.Login == "" && strings.EqualFold(n.owner, v.Owner) {
				v.Login = n.login
			}
		}
		for j := range v.Departures {
			v.Departures[j].Alias = of(v.Departures[j].VM).alias
		}
		for j := range v.History {
			v.History[j].Alias = of(v.History[j].VM).alias
		}
	}
	return nil
}

// feedsView is the updater's feeds' health and its last commit.
func feedsView(u *feeds.Updater) Feeds {
	out := Feeds{Feeds: append([]FeedStatus{}, u.Feeds()...), Pending: u.Pending()}
	if lc := u.LastCommit(); !lc.Time.IsZero() {
		out.LastCommit = &Commit{Time: lc.Time, VMs: lc.VMs, DurationMS: float64(lc.Duration.Microseconds()) / 1000,
			OldestChangeMS: float64(lc.Oldest.Microseconds()) / 1000, Error: lc.Err}
	}
	g := u.RemovalGuard()
	out.RemovalGuard = &g
	return out
}

// VMJSON renders a stored VM. Its last_visit is when a feed last saw it
// as far as the store knows: the later of its last change and its saved
// last-seen time (the live API adds the updater's newer word). Its names
// are in the reference's order (sortVMNames), zone by zone in forward's
// order (the configuration's; nil: by name).
func VMJSON(vm db.VM, forward []string) VM {
	out := VM{UUID: vm.UUID, Names: []string{}, Reasons: []string{}}
	var meta *feeds.VMMeta
	var names []vmName
	if m, err := feeds.DecodeVMMeta(vm.Meta); err == nil {
		meta = m
		// A VM is seen when it changes, and its meta is written then.
		out.LastVisit = m.Updated.UnixMilli()
		out.Alias, out.Owner, out.Login, out.Server, out.State = m.Alias, m.Owner, m.Login, m.Server, m.State
		out.ListInstance, out.ListServices = m.ListInstance, m.ListServices
		out.Reasons = append(out.Reasons, m.Reasons...)
		out.Services, out.Problems = m.Services, m.Problems
		out.ComputeNode = m.ComputeNode
	}
	for _, rec := range vm.Records {
		for _, rr := range rec.RRs {
			out.Records = append(out.Records, strings.ReplaceAll(rr.String(), "\t", " "))
			_, cname := rr.(*dns.CNAME)
			if t, ok := rr.(*dns.TXT); ok && len(t.Txt) == 1 && t.Txt[0] == vm.UUID || out.ComputeNode && cname {
				n := vmName{name: strings.TrimSuffix(rec.Owner, "."), zone: rec.Zone}
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
	}
	sortVMNames(names, meta, forward)
	for _, n := range names {
		out.Names = append(out.Names, n.name)
	}
	out.LastVisit = max(out.LastVisit, vm.LastSeen.UnixMilli())
	if vm.Client != nil {
		for _, a := range vm.Client.Addrs {
			s := a.Addr.String()
			if a.Fabric.IsValid() {
				s += " (fabric " + a.Fabric.String() + ")"
			}
			out.ClientAddrs = append(out.ClientAddrs, s)
		}
		out.ShortNames = shortNames(out.Names)
	}
	return out
}

// vmName is one of a VM's names and its zone.
type vmName struct{ name, zone string }

// sortVMNames puts a VM's names in the order the reference lists them
// (GET /vm/:uuid, which CloudAPI shows as dns_names): zone by zone, the
// forward zones in configuration order; in a zone its instance names,
// then its service names service by service; each group in the order the
// reference makes the names (lib/vm-to-zones.js addInstance, addService):
// the UUID's before the alias's, the owner's UUID before its login, and a
// name before its network-name variant. The reference's zones come in the
// order of the VM's NICs; cns keeps no NIC order with the names, and the
// configuration's is the same for a VM's first NIC.
func sortVMNames(names []vmName, m *feeds.VMMeta, forward []string) {
	var vmUUID, owner string
	var services []string
	if m != nil {
		vmUUID, owner, services = m.UUID, m.Owner, m.Services
	}
	zoneRank := func(z string) int {
		if i := slices.Index(forward, z); i >= 0 {
			return i
		}
		return len(forward)
	}
	// rank is the name's place in its zone: group (instance 0, service 1,
	// other 2), service, then the reference's variants as bits (doubled:
	// an admin-owned service's bare name comes right after its first).
	rank := func(n vmName) [3]int {
		labels := strings.Split(strings.TrimSuffix(n.name, "."+n.zone), ".")
		if len(labels) == 1 && slices.Contains(services, labels[0]) {
			return [3]int{1, slices.Index(services, labels[0]), 1}
		}
		for i, l := range labels {
			if i == 0 || l != "inst" && l != "svc" {
				continue
			}
			head := labels[:i]
			variants := 0
			if i+1 < len(labels) && labels[i+1] != owner {
				variants |= 4 // the login's
			}
			if len(head) > 1 {
				variants |= 2 // a network-name variant
			}
			if l == "svc" {
				return [3]int{1, slices.Index(services, head[len(head)-1]), variants}
			}
			if head[len(head)-1] != vmUUID {
				variants |= 8 // the alias's
			}
			return [3]int{0, 0, variants}
		}
		return [3]int{2, 0, 0}
	}
	slices.SortStableFunc(names, func(a, b vmName) int {
		if c := cmp.Compare(zoneRank(a.zone), zoneRank(b.zone)); c != 0 {
			return c
		}
		if c := strings.Compare(a.zone, b.zone); c != 0 {
			return c
		}
		ra, rb := rank(a), rank(b)
		return cmp.Or(cmp.Compare(ra[0], rb[0]), cmp.Compare(ra[1], rb[1]), cmp.Compare(ra[2], rb[2]), strings.Compare(a.name, b.name))
	})
}

// shortNames are the owner-less forms of a VM's names that client_answers
// gives its owner's instances: the label after "inst" or "svc" (the
// owner) dropped, and self.inst.<zone> in every zone with an instance
// name.
func shortNames(names []string) []string {
	var out []string
	for _, n := range names {
		labels := strings.Split(n, ".")
		for i := 1; i+2 < len(labels); i++ {
			if labels[i] != "inst" && labels[i] != "svc" {
				continue
			}
			zone := strings.Join(labels[i+2:], ".")
			add := func(s string) {
				if !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
			add(strings.Join(labels[:i+1], ".") + "." + zone)
			if labels[i] == "inst" {
				add("self.inst." + zone)
			}
			break
		}
	}
	slices.Sort(out)
	return out
}

func vmSummary(uuid string, m *feeds.VMMeta) VMSummary {
	return VMSummary{UUID: uuid, Alias: m.Alias, Owner: m.Owner, Login: m.Login, State: m.State,
		ListInstance: m.ListInstance, ListServices: m.ListServices, Reasons: append([]string{}, m.Reasons...)}
}

// ChangeJSON renders a journal entry.
func ChangeJSON(e db.JournalEntry) Change {
	c := Change{From: e.From, To: e.To, Time: e.Time, Cause: e.Cause, Deleted: []string{}, Added: []string{}}
	for _, list := range []struct {
		in  []db.JournalRR
		out *[]string
	}{{e.Deleted, &c.Deleted}, {e.Added, &c.Added}} {
		for _, jr := range list.in {
			rr, err := db.DecodeRR(jr.Owner, jr.RR)
			if err != nil {
				*list.out = append(*list.out, "; "+err.Error())
				continue
			}
			*list.out = append(*list.out, strings.ReplaceAll(rr.String(), "\t", " "))
		}
	}
	return c
}

// ByOwnerName returns services ordered as operators read them: by owner
// login (UUID where the login is unknown), then by service name.
func ByOwnerName(views []Service) []Service {
	out := slices.Clone(views)
	slices.SortStableFunc(out, func(a, b Service) int {
		return cmp.Or(cmp.Compare(cmp.Or(a.Login, a.Owner), cmp.Or(b.Login, b.Owner)), cmp.Compare(a.Service, b.Service))
	})
	return out
}

// APIModel reads a running cns through its API.
type APIModel struct {
	Client *Client
}

func (s APIModel) Describe() string { return "api " + s.Client.Base }
func (s APIModel) Live() bool       { return true }

// Zones lists the zones with their detail (one request per zone).
func (s APIModel) Zones(ctx context.Context) ([]Zone, error) {
	list, err := s.Client.Zones(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Zone, 0, len(list))
	for _, z := range list {
		zd, err := s.Client.Zone(ctx, z.Name)
		if IsNotFound(err) {
			continue // served but not (yet) stored: skip until it is
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *zd)
	}
	return out, nil
}

func (s APIModel) History(ctx context.Context, zone string, limit int) ([]Change, error) {
	return s.Client.History(ctx, zone, 0, limit)
}

// Peers are the peers of GET /status, with their per-zone detail.
func (s APIModel) Peers(ctx context.Context) ([]Peer, error) {
	st, err := s.Client.Status(ctx)
	if err != nil {
		return nil, err
	}
	return st.Peers, nil
}

func (s APIModel) Services(ctx context.Context) ([]Service, error) {
	return s.Client.Services(ctx, false)
}

func (s APIModel) SearchVMs(ctx context.Context, q string, limit int) (*VMSearch, error) {
	return s.Client.SearchVMs(ctx, q, limit)
}

func (s APIModel) VM(ctx context.Context, uuid string) (*VM, error) {
	return s.Client.VM(ctx, uuid)
}

func (s APIModel) Feeds(ctx context.Context) (*Feeds, error) {
	return s.Client.Feeds(ctx)
}

// DBModel reads a db file, read-only: what a stopped (or another) server
// stored. Feed health lives only in a running server; services are
// viewed under the default hysteresis policy; a zone's expected peers are
// in the configuration, not the file.
type DBModel struct {
	Store *db.DB
	// DecodePeer decodes a peer as the DNS server stored it (package main
	// gives it: the stored form is serve's).
	DecodePeer func([]byte) (Peer, error)
	// Now is the clock for drift and the services' view (time.Now when
	// nil).
	Now func() time.Time
}

// OpenDB opens path read-only.
func OpenDB(path string, decodePeer func([]byte) (Peer, error)) (*DBModel, error) {
	store, err := db.Open(path, db.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return &DBModel{Store: store, DecodePeer: decodePeer}, nil
}

// Close closes the file.
func (s *DBModel) Close() error { return s.Store.Close() }

func (s *DBModel) Describe() string { return "db " + s.Store.Path() + " (read-only)" }
func (s *DBModel) Live() bool       { return false }

func (s *DBModel) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *DBModel) Zones(ctx context.Context) ([]Zone, error) {
	zones, err := s.Store.Zones()
	if err != nil {
		return nil, err
	}
	out := make([]Zone, 0, len(zones))
	for _, z := range zones {
		out = append(out, zoneView(z))
	}
	return out, nil
}

func (s *DBModel) History(ctx context.Context, zone string, limit int) ([]Change, error) {
	entries, err := s.Store.History(zone, 0, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Change, 0, len(entries))
	for _, e := range entries {
		out = append(out, ChangeJSON(e))
	}
	return out, nil
}

// Peers are the stored peers, by address, with each zone's drift against
// the stored serial.
func (s *DBModel) Peers(ctx context.Context) ([]Peer, error) {
	raw, err := s.Store.Peers()
	if err != nil {
		return nil, err
	}
	zones, err := s.Store.Zones()
	if err != nil {
		return nil, err
	}
	serials := map[string]uint32{}
	for _, z := range zones {
		serials[z.Name] = z.Serial
	}
	now := s.now()
	out := make([]Peer, 0, len(raw))
	for _, addr := range slices.Sorted(maps.Keys(raw)) {
		p, err := s.DecodePeer(raw[addr])
		if err != nil {
			return nil, fmt.Errorf("peer %s: %w", addr, err)
		}
		out = append(out, peerView(s.Store, p, func(z string) uint32 { return serials[z] }, now))
	}
	return out, nil
}

// Services are the stored services' hysteresis, by key.
func (s *DBModel) Services(ctx context.Context) ([]Service, error) {
	raw, err := s.Store.Hysteresis()
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]Service, 0, len(raw))
	for _, key := range slices.Sorted(maps.Keys(raw)) {
		svc, err := hysteresis.Decode(raw[key])
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", key, err)
		}
		out = append(out, hysteresis.Policy{}.View(svc, now))
	}
	return out, nameServices(s.Store, out)
}

func (s *DBModel) SearchVMs(ctx context.Context, q string, limit int) (*VMSearch, error) {
	res, err := SearchVMs(ctx, s.Store, q, limit)
	return &res, err
}

func (s *DBModel) VM(ctx context.Context, uuid string) (*VM, error) {
	vm, ok, err := s.Store.VM(uuid)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &Error{Status: 404, Code: "ResourceNotFound", Message: "VM " + uuid + " is not in the db"}
	}
	out := VMJSON(vm, nil)
	return &out, nil
}

// Feeds: a db file holds no feed state.
func (s *DBModel) Feeds(ctx context.Context) (*Feeds, error) {
	return &Feeds{Feeds: []FeedStatus{}}, nil
}
