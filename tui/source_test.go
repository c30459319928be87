package tui

import (
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/admin/admintest"
)

// openDemo opens the demo data center (testdata/cns.json), stored on the
// fixed clock with one peer, as admin's offline read model. Package main
// gives the real one the DNS server's decoder of stored peers.
func openDemo(t *testing.T) *admin.DBModel {
	d := admintest.Store(t, admintest.Options{Now: fixedClock})
	d.SavePeer(t, "192.0.2.53", cnsZone, 5, now.Add(-time.Hour))
	path := d.Store.Path()
	if err := d.Store.Close(); err != nil {
		t.Fatal(err)
	}
	src, err := admin.OpenDB(path, admintest.DecodePeer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	src.Now = fixedClock
	return src
}

// offline names the file the same way on every run.
type offline struct{ *admin.DBModel }

func (offline) Describe() string { return "db cns.db (read-only)" }

// The UI over a db file: no periodic refresh, the same pages.
func TestOfflineScreens(t *testing.T) {
	src := openDemo(t)
	for _, tc := range []struct {
		name  string
		steps func(h *harness)
	}{
		{"vm", func(h *harness) {
			h.wait(intZone)
			h.keys("4")
			h.wait("carol-mx")
			h.keys("/", "dave", "enter")
			h.wait(`matching "dave"`)
			h.keys("enter")
			h.wait("approved")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, offline{src}, 80, 24, Options{})
			tc.steps(h)
			teatest.RequireEqualOutput(t, []byte(h.screen()))
		})
	}
}
