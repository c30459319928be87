package admin

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin/admintest"
)

const carolVM = "e76f7f8b-fb63-4c58-adf4-5b275a0d5aa6"

// openStoredDemo stores the demo data center with one peer, 5 serials
// behind on the public zone, and opens the file as the offline read model.
// Package main gives the real model serve's decoder of stored peers; the
// stored form's fields carry the API's names, so the test decodes them
// straight.
func openStoredDemo(t *testing.T) *DBModel {
	d := admintest.Store(t, admintest.Options{})
	d.SavePeer(t, "192.0.2.53", publicZone, 5, time.Now().Add(-time.Hour))
	path := d.Store.Path()
	if err := d.Store.Close(); err != nil {
		t.Fatal(err)
	}
	src, err := OpenDB(path, admintest.DecodePeer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// The offline read model reads what the server stored, read-only, and
// computes the peers' drift and the services' view as the API does.
func TestDBModel(t *testing.T) {
	src := openStoredDemo(t)
	ctx := context.Background()
	if src.Live() || !strings.HasSuffix(src.Describe(), "cns.db (read-only)") {
		t.Errorf("describe %q, live %v", src.Describe(), src.Live())
	}

	zones, err := src.Zones(ctx)
	if err != nil || len(zones) != 5 {
		t.Fatalf("zones: %d, %v", len(zones), err)
	}
	var cns struct{ serial uint32 }
	for _, z := range zones {
		if z.Name == publicZone {
			cns.serial = z.Serial
			if z.Records == 0 || z.Names == 0 || z.LastChange.IsZero() {
				t.Errorf("zone %s: %+v", z.Name, z)
			}
		}
	}
	if _, err := src.History(ctx, publicZone, 10); err != nil {
		t.Errorf("history: %v", err)
	}

	res, err := src.SearchVMs(ctx, "carol", 10)
	if err != nil || len(res.VMs) != 2 {
		t.Fatalf("search carol: %+v %v", res, err)
	}
	vm, err := src.VM(ctx, carolVM)
	if err != nil || vm.ListInstance || !slices.Equal(vm.Reasons, []string{"user_en_flag"}) {
		t.Errorf("vm: %+v %v", vm, err)
	}
	if _, err := src.VM(ctx, "00000000-0000-4000-8000-000000000000"); err == nil {
		t.Error("an unknown VM: no error")
	}

	peers, err := src.Peers(ctx)
	if err != nil || len(peers) != 1 {
		t.Fatalf("peers: %+v %v", peers, err)
	}
	pz := peers[0].Zones[publicZone]
	if pz.Serial != cns.serial-5 || pz.ZoneSerial != cns.serial || pz.DriftSerials != 5 || pz.DriftSeconds != -1 {
		t.Errorf("peer zone: %+v (zone serial %d)", pz, cns.serial)
	}

	views, err := src.Services(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range views {
		if v.Service == "web" && v.Owner == aliceUUID {
			found = true
			// Named as the API names them (TestServicesSpeakInNames).
			if v.Login != "alice" || len(v.Members) != 3 || slices.ContainsFunc(v.Members, func(m ServiceMember) bool { return m.Alias == "" }) {
				t.Errorf("web of alice, unnamed: %+v", v)
			}
		}
	}
	if !found {
		t.Errorf("services: no web of alice in %d views", len(views))
	}
	f, err := src.Feeds(ctx)
	if err != nil || len(f.Feeds) != 0 {
		t.Errorf("feeds: %+v %v", f, err)
	}
}

// A compute node's entry says what it is and lists its CMON names
// (cnsadm's TestWriteVMComputeNode prints them).
func TestComputeNodeView(t *testing.T) {
	const headnode = "6da8b7df-c541-498f-90ef-01d5730ef236"
	src := openStoredDemo(t)
	vm, err := src.VM(context.Background(), headnode)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{headnode + ".cmon." + publicZone, headnode + ".cmon.us-west-1.int.example.com"}
	if !vm.ComputeNode || vm.Alias != "headnode" || !slices.Equal(vm.Names, want) || !slices.Equal(vm.Reasons, []string{"compute_node"}) {
		t.Errorf("compute node: %+v", vm)
	}
	// A VM's CMON CNAME is not among its names.
	if vm, err := src.VM(context.Background(), carolVM); err != nil || vm.ComputeNode || slices.ContainsFunc(vm.Names, func(n string) bool { return strings.Contains(n, ".cmon.") }) {
		t.Errorf("a VM: %+v %v", vm, err)
	}
}
