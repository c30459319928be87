// Package admintest stores the demo data center for the tests of what
// reads a store: admin's API and read model, and the terminal UI. The
// demo is what `cns serve -c testdata/cns.json` serves: that file's
// zones and naming, and the inventory it names, committed by the
// updater; so a change to the demo changes every such test alike, and
// none restates it.
package admintest

import (
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
)

// Demo is the demo data center, stored.
type Demo struct {
	Config    *config.Config // testdata/cns.json
	Store     *db.DB
	Updater   *feeds.Updater
	Inventory *dc.Inventory
}

// Options are what a test may change.
type Options struct {
	// Now is the store's and the updater's clock (nil: time.Now).
	Now func() time.Time
}

// ConfigPath is testdata/cns.json, wherever the test runs from.
func ConfigPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "cns.json")
}

// Store commits the demo data center to a new store in a temporary
// directory, which the test's cleanup closes.
func Store(t testing.TB, o Options) *Demo {
	t.Helper()
	cfg, err := config.Load(ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	store, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true, Now: o.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	u, err := feeds.NewUpdater(store, feeds.Options{Records: cfg.RecordsConfig(), Zones: cfg.ZoneConfig(), Now: o.Now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := dc.LoadInventory(cfg.InventoryFile)
	if err != nil {
		t.Fatal(err)
	}
	u.SetInventory(inv, "inventory file loaded")
	for u.Pending() > 0 {
		if err := u.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return &Demo{Config: cfg, Store: store, Updater: u, Inventory: inv}
}

// SavePeer stores one secondary of zone, at the serial behind commits
// before the zone's, its last transfer an AXFR at lastTransfer: as a
// running server would have left it.
func (d *Demo) SavePeer(t testing.TB, addr, zone string, behind uint32, lastTransfer time.Time) {
	t.Helper()
	zi, _, err := d.Store.Zone(zone)
	if err != nil {
		t.Fatal(err)
	}
	p := status.Peer{Address: addr, Version: "9.18.28", Counters: map[string]uint64{"axfr": 1},
		Zones: map[string]status.PeerZone{zone: {ZoneTracking: status.ZoneTracking{Serial: zi.Serial - behind,
			LastTransfer: lastTransfer, LastKind: "AXFR", AXFR: 1}}}}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Store.SavePeers(map[string][]byte{addr: raw}); err != nil {
		t.Fatal(err)
	}
}

// DecodePeer decodes a peer SavePeer stored, for admin.OpenDB (the
// program's own decoder is the DNS server's, which tests of admin and the
// terminal UI do not import).
func DecodePeer(raw []byte) (status.Peer, error) {
	var p status.Peer
	err := json.Unmarshal(raw, &p)
	return p, err
}
