package tui

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/hysteresis"
	"github.com/tritondatacenter/cns/serve"
)

// Source is where the UI reads from: a running cns through its API
// (APISource), or a db file offline (DBSource). The pages call it only
// from tea.Cmds, never from Update or View.
type Source interface {
	// Describe names the source for the status line.
	Describe() string
	// Live reports whether the data changes on its own (the API): the UI
	// refreshes it periodically.
	Live() bool
	Zones(ctx context.Context) ([]admin.Zone, error)
	History(ctx context.Context, zone string, limit int) ([]admin.Change, error)
	Peers(ctx context.Context) ([]admin.Peer, error)
	Services(ctx context.Context) ([]hysteresis.View, error)
	SearchVMs(ctx context.Context, query string, limit int) (*admin.VMSearch, error)
	VM(ctx context.Context, uuid string) (*admin.VM, error)
	Feeds(ctx context.Context) (*admin.Feeds, error)
}

// APISource reads a running cns through its admin API.
type APISource struct {
	Client *admin.Client
}

func (s APISource) Describe() string { return "api " + s.Client.Base }
func (s APISource) Live() bool       { return true }

// Zones lists the zones with their detail (one request per zone).
func (s APISource) Zones(ctx context.Context) ([]admin.Zone, error) {
	list, err := s.Client.Zones(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.Zone, 0, len(list))
	for _, z := range list {
		zd, err := s.Client.Zone(ctx, z.Name)
		if admin.IsNotFound(err) {
			continue // served but not (yet) stored: skip until it is
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *zd)
	}
	return out, nil
}

func (s APISource) History(ctx context.Context, zone string, limit int) ([]admin.Change, error) {
	return s.Client.History(ctx, zone, 0, limit)
}

// Peers are the peers of GET /status, with their per-zone detail.
func (s APISource) Peers(ctx context.Context) ([]admin.Peer, error) {
	st, err := s.Client.Status(ctx)
	if err != nil {
		return nil, err
	}
	return st.Peers, nil
}

func (s APISource) Services(ctx context.Context) ([]hysteresis.View, error) {
	return s.Client.Services(ctx, false)
}

func (s APISource) SearchVMs(ctx context.Context, q string, limit int) (*admin.VMSearch, error) {
	return s.Client.SearchVMs(ctx, q, limit)
}

func (s APISource) VM(ctx context.Context, uuid string) (*admin.VM, error) {
	return s.Client.VM(ctx, uuid)
}

func (s APISource) Feeds(ctx context.Context) (*admin.Feeds, error) {
	return s.Client.Feeds(ctx)
}

// DBSource reads a db file, read-only: what a stopped (or another)
// server stored. Feed health lives only in a running server; services
// are viewed under the default hysteresis policy; a zone's expected peers
// are in the configuration, not the file.
type DBSource struct {
	Store *db.DB
	// Now is the clock for drift and the services' view (time.Now when
	// nil).
	Now func() time.Time
}

// OpenDB opens path read-only.
func OpenDB(path string) (*DBSource, error) {
	store, err := db.Open(path, db.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return &DBSource{Store: store}, nil
}

// Close closes the file.
func (s *DBSource) Close() error { return s.Store.Close() }

func (s *DBSource) Describe() string { return "db " + s.Store.Path() + " (read-only)" }
func (s *DBSource) Live() bool       { return false }

func (s *DBSource) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *DBSource) Zones(ctx context.Context) ([]admin.Zone, error) {
	zones, err := s.Store.Zones()
	if err != nil {
		return nil, err
	}
	out := make([]admin.Zone, 0, len(zones))
	for _, z := range zones {
		out = append(out, admin.Zone{Name: z.Name, Serial: z.Serial, Reverse: z.Reverse, Names: z.Names, Records: z.Records,
			LastChange: z.LastChange, Journal: admin.Journal{From: z.JournalFrom, Entries: z.JournalEntries, Bytes: z.JournalBytes},
			Peers: []admin.ZonePeer{}})
	}
	return out, nil
}

func (s *DBSource) History(ctx context.Context, zone string, limit int) ([]admin.Change, error) {
	entries, err := s.Store.History(zone, 0, limit)
	if err != nil {
		return nil, err
	}
	out := make([]admin.Change, 0, len(entries))
	for _, e := range entries {
		out = append(out, admin.ChangeJSON(e))
	}
	return out, nil
}

// Peers decodes the peer state the server stored, with each zone's drift
// against the stored serial.
func (s *DBSource) Peers(ctx context.Context) ([]admin.Peer, error) {
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
	out := make([]admin.Peer, 0, len(raw))
	for _, addr := range slices.Sorted(maps.Keys(raw)) {
		var p serve.Peer
		if err := json.Unmarshal(raw[addr], &p); err != nil {
			return nil, fmt.Errorf("peer %s: %w", addr, err)
		}
		ap := admin.Peer{Address: p.Address, Serials: map[string]uint32{}, Version: cmp.Or(p.Version, "unknown"),
			NotifyFailures: p.NotifyFailures, UsingNotify: p.NotifyFailures < 5, UsingIXFR: p.Counters["ixfr"] > 2*p.Counters["axfr"],
			Counters: p.Counters, Zones: map[string]admin.PeerZone{}}
		for z, pz := range p.Zones {
			if pz == nil {
				continue
			}
			cur := serials[z]
			ds, dt := s.drift(z, pz.Serial, cur, now)
			ap.Serials[z] = pz.Serial
			ap.Zones[z] = admin.PeerZone{Serial: pz.Serial, ZoneSerial: cur, DriftSerials: ds, DriftSeconds: dt,
				LastTransfer: pz.LastTransfer, LastKind: pz.LastKind, AXFR: pz.AXFR, IXFR: pz.IXFR,
				NotifySerial: pz.NotifySerial, NotifySent: pz.NotifySent, NotifyAcked: pz.NotifyAcked, LastSOAQuery: pz.LastSOAQuery}
		}
		out = append(out, ap)
	}
	return out, nil
}

// drift is the API's: commits behind, and seconds since the first change
// the peer lacks (-1 when the journal no longer tells).
func (s *DBSource) drift(zone string, have, cur uint32, now time.Time) (int64, float64) {
	if have == cur || cur == 0 {
		return 0, 0
	}
	entries, ok, err := s.Store.Journal(zone, have)
	if err != nil || !ok || len(entries) == 0 {
		return int64(int32(cur - have)), -1
	}
	return int64(len(entries)), now.Sub(entries[0].Time).Seconds()
}

func (s *DBSource) Services(ctx context.Context) ([]hysteresis.View, error) {
	raw, err := s.Store.Hysteresis()
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]hysteresis.View, 0, len(raw))
	for _, key := range slices.Sorted(maps.Keys(raw)) {
		svc, err := hysteresis.Decode(raw[key])
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", key, err)
		}
		out = append(out, hysteresis.Policy{}.View(svc, now))
	}
	return out, nil
}

func (s *DBSource) SearchVMs(ctx context.Context, q string, limit int) (*admin.VMSearch, error) {
	res, err := admin.SearchVMs(ctx, s.Store, q, limit)
	return &res, err
}

func (s *DBSource) VM(ctx context.Context, uuid string) (*admin.VM, error) {
	vm, ok, err := s.Store.VM(uuid)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &admin.Error{Status: 404, Code: "ResourceNotFound", Message: "VM " + uuid + " is not in the db"}
	}
	out := admin.VMJSON(vm)
	return &out, nil
}

// Feeds: a db file holds no feed state.
func (s *DBSource) Feeds(ctx context.Context) (*admin.Feeds, error) {
	return &admin.Feeds{Feeds: []admin.FeedStatus{}}, nil
}
