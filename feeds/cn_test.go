package feeds_test

import (
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
)

// cmonTarget returns the CNAME target the store publishes for a compute
// node's (or VM's) CMON name in zone, "" when there is none.
func (w *hzWorld) cmonTarget(uuid, zone string) string {
	w.t.Helper()
	zw, _ := db.ZoneWire(zone)
	ow, _ := db.ZoneWire(uuid + ".cmon." + zone)
	rrs, _, err := w.store.Lookup(zone, zw, ow)
	if err != nil {
		w.t.Fatal(err)
	}
	list, err := rrs.ToRR(dns.Fqdn(uuid + ".cmon." + zone))
	if err != nil {
		w.t.Fatal(err)
	}
	for _, rr := range list {
		if c, ok := rr.(*dns.CNAME); ok {
			return c.Target
		}
	}
	return ""
}

func (w *hzWorld) serial() uint32 {
	w.t.Helper()
	zi, ok, err := w.store.Zone(hzZone)
	if err != nil || !ok {
		w.t.Fatalf("zone %s: %v %v", hzZone, ok, err)
	}
	return zi.Serial
}

// Every set-up compute node the updater holds gets its CMON name, from
// the servers alone: the world has no admin account and no admin
// network. The name stays whatever the CN's running state, and goes
// with the CN or its setup. (The CN runs no VM: a VM's service names
// would change with the CN's state.)
func TestComputeNodeCMONNames(t *testing.T) {
	w := newHZWorld(t, 0)
	want := "cmon." + hzZone + "."
	if got := w.cmonTarget(hzServer, hzZone); got != want {
		t.Fatalf("CN %s: CMON CNAME %q, want %q", hzServer, got, want)
	}
	vm, ok, err := w.store.VM(hzServer)
	if err != nil || !ok {
		t.Fatalf("the CN's entry: %v %v", ok, err)
	}
	m, err := feeds.DecodeVMMeta(vm.Meta)
	if err != nil || !m.ComputeNode || m.Alias != "cn1" || !slices.Equal(m.Reasons, []string{"compute_node"}) {
		t.Fatalf("the CN's meta: %+v %v", m, err)
	}

	// Down (status unknown, silent for years): the name stays, the
	// zone does not change, and the CN's entry says it is down.
	serial := w.serial()
	old := "2021-03-14T09:26:53.589Z"
	down := dc.Server{UUID: hzServer, Hostname: "cn1", Setup: true, Status: "unknown", LastHeartbeat: &old}
	w.u.SetServers([]dc.Server{down}, "test: CN down")
	w.settle()
	if got := w.cmonTarget(hzServer, hzZone); got != want || w.serial() != serial {
		t.Errorf("CN down: CMON CNAME %q, serial %d -> %d", got, serial, w.serial())
	}
	if vm, _, _ := w.store.VM(hzServer); !metaOf(t, vm).CNDown {
		t.Error("CN down: its entry does not say so")
	}

	// A full listing of the same world commits nothing.
	inv := w.inv
	inv.Servers = []dc.Server{down}
	w.u.SetInventory(&inv, "test: full listing")
	w.settle()
	if w.serial() != serial || w.cmonTarget(hzServer, hzZone) != want {
		t.Errorf("a full listing changed the zone: serial %d -> %d", serial, w.serial())
	}

	// A new server: names once set up, not before; removed: gone.
	const fresh = "c0ffee00-0000-4000-8000-000000000001"
	w.u.SetServers([]dc.Server{down, {UUID: fresh, Hostname: "cn9", Status: "running"}}, "test: CN added")
	w.settle()
	if got := w.cmonTarget(fresh, hzZone); got != "" {
		t.Errorf("a CN not set up has a CMON name: %q", got)
	}
	w.u.SetServers([]dc.Server{down, {UUID: fresh, Hostname: "cn9", Setup: true, Status: "running"}}, "test: CN set up")
	w.settle()
	if got := w.cmonTarget(fresh, hzZone); got != want {
		t.Errorf("CN set up: CMON CNAME %q", got)
	}
	w.u.SetServers([]dc.Server{down}, "test: CN removed")
	w.settle()
	if got := w.cmonTarget(fresh, hzZone); got != "" {
		t.Errorf("CN removed: CMON CNAME %q stays", got)
	}
	if _, ok, _ := w.store.VM(fresh); ok {
		t.Error("CN removed: its entry stays")
	}

	// The CN outlives a restart, and the first listing after it
	// rewrites nothing.
	serial = w.serial()
	w.inv.Servers = []dc.Server{down}
	w.restart()
	if w.serial() != serial || w.cmonTarget(hzServer, hzZone) != want {
		t.Errorf("after a restart: serial %d -> %d", serial, w.serial())
	}
}

func metaOf(t *testing.T, vm db.VM) *feeds.VMMeta {
	t.Helper()
	m, err := feeds.DecodeVMMeta(vm.Meta)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A configuration change gives the compute nodes their names in the new
// zones too, as it does VMs.
func TestComputeNodeCMONNamesFollowZones(t *testing.T) {
	w := newHZWorld(t, 0)
	const extra = "extra.example.com"
	rc, zc := hzConfig()
	rc.Zones = append(rc.Zones, rc.Zones[0])
	rc.Zones[1].Name = extra
	zc.Forward[extra] = zc.Forward[hzZone]
	w.u.SetConfig(rc, zc)
	w.settle()
	for _, z := range []string{hzZone, extra} {
		if got := w.cmonTarget(hzServer, z); got != "cmon."+z+"." {
			t.Errorf("zone %s: CMON CNAME %q", z, got)
		}
	}
}
