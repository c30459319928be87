package sdc_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// The client tests run every SDC client against the simulator over real
// sockets on 127.0.0.1, healthy and with faults.

func startSim(t *testing.T, inv *dc.Inventory, opts sdcsim.Options) *sdcsim.Sim {
	t.Helper()
	s, err := sdcsim.New(*inv, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// hookTransport runs a function after every request it carries.
type hookTransport struct {
	after func(*http.Request)
}

func (h hookTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if h.after != nil {
		h.after(r)
	}
	return resp, err
}

func uuidsOf(vms []dc.VM) []string {
	out := make([]string, len(vms))
	for i := range vms {
		out[i] = vms[i].UUID
	}
	return out
}

func activeUUIDs(inv dc.Inventory) []string {
	var out []string
	for _, vm := range inv.VMs {
		if vm.State != "destroyed" && vm.State != "failed" {
			out = append(out, strings.ToLower(vm.UUID))
		}
	}
	slices.Sort(out)
	return out
}

func TestVMAPIListAllMarker(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 1234, Seed: 7})
	s := startSim(t, inv, sdcsim.Options{})
	c, err := sdc.NewVMAPI(sdc.VMAPIOptions{Address: s.VMAPIURL(), Limit: 100}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := c.ProbeMarker(ctxT(t))
	if err != nil || !ok {
		t.Fatalf("marker probe: %v %v", ok, err)
	}
	before := s.Requests(sdcsim.RouteListVMs)
	vms, err := c.ListAllVMs(ctxT(t), sdc.VMFilter{State: "active"})
	if err != nil {
		t.Fatal(err)
	}
	got := uuidsOf(vms)
	if !slices.IsSortedFunc(got, func(a, b string) int { return strings.Compare(b, a) }) {
		t.Error("listing not in uuid DESC order")
	}
	slices.Sort(got)
	if want := activeUUIDs(s.Inventory()); !slices.Equal(got, want) {
		t.Fatalf("listed %d VMs, want %d", len(got), len(want))
	}
	// 1234 VMs at 100 a page: 13 pages, the last short; no empty page.
	if n := s.Requests(sdcsim.RouteListVMs) - before; n != 13 {
		t.Errorf("%d requests for 13 pages (plus the probe done earlier)", n)
	}
}

// A marker VM destroyed between two pages makes VMAPI answer limit+1
// VMs; the listing must take them all and go on.
func TestVMAPIListAllLimitPlusOne(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 50, Seed: 3})
	var s *sdcsim.Sim
	var once sync.Once
	hc := &http.Client{Transport: hookTransport{after: func(r *http.Request) {
		if r.URL.Path != "/vms" || r.URL.Query().Get("limit") != "10" || r.URL.Query().Has("marker") {
			return
		}
		// After the first page: destroy the VM the next marker will name.
		once.Do(func() {
			order := activeUUIDs(s.Inventory())
			slices.Reverse(order)
			if err := s.DestroyVM(order[9]); err != nil {
				t.Error(err)
			}
		})
	}}}
	s = startSim(t, inv, sdcsim.Options{})
	c, _ := sdc.NewVMAPI(sdc.VMAPIOptions{Address: s.VMAPIURL(), Limit: 10}, hc, 0)
	vms, err := c.ListAllVMs(ctxT(t), sdc.VMFilter{State: "active"})
	if err != nil {
		t.Fatal(err)
	}
	got := uuidsOf(vms)
	slices.Sort(got)
	want := activeUUIDs(s.Inventory())
	// The destroyed marker VM was listed on page one; every live one must be there.
	for _, id := range want {
		if _, found := slices.BinarySearch(got, id); !found {
			t.Errorf("live VM %s missing", id)
		}
	}
	if len(got) != len(want)+1 {
		t.Errorf("listed %d, want %d live + the destroyed marker", len(got), len(want))
	}
}

// A VMAPI that refuses "marker" (409) is paged by offset.
func TestVMAPIOffsetFallback(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 120, Seed: 4})
	s := startSim(t, inv, sdcsim.Options{})
	s.SetFault(sdcsim.RouteListVMs, sdcsim.Fault{Times: 1, Status: 409})
	c, _ := sdc.NewVMAPI(sdc.VMAPIOptions{Address: s.VMAPIURL(), Limit: 50}, nil, 0)
	vms, err := c.ListAllVMs(ctxT(t), sdc.VMFilter{State: "active"})
	if err != nil {
		t.Fatal(err)
	}
	got := uuidsOf(vms)
	slices.Sort(got)
	if want := activeUUIDs(s.Inventory()); !slices.Equal(got, want) {
		t.Fatalf("offset listing: %d VMs, want %d", len(got), len(want))
	}
}

// Any page failing fails the whole listing: a partial one is never
// returned.
func TestVMAPIListingFaults(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 300, Seed: 5})
	s := startSim(t, inv, sdcsim.Options{})
	c, _ := sdc.NewVMAPI(sdc.VMAPIOptions{Address: s.VMAPIURL(), Limit: 100}, nil, 500*time.Millisecond)
	if _, err := c.ProbeMarker(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		fault sdcsim.Fault
		check func(error) bool
	}{
		{"503", sdcsim.Fault{Times: 1, Status: 503}, func(err error) bool {
			var ae *sdc.APIError
			return errors.As(err, &ae) && ae.Status == 503 && ae.Code == "MorayBucketsNotSetup"
		}},
		{"500", sdcsim.Fault{Times: 1, Status: 500}, func(err error) bool {
			var ae *sdc.APIError
			return errors.As(err, &ae) && ae.Status == 500
		}},
		{"malformed", sdcsim.Fault{Times: 1, Malformed: true}, func(err error) bool {
			return strings.Contains(err.Error(), "bad answer")
		}},
		{"hang", sdcsim.Fault{Times: 1, Hang: true}, func(err error) bool {
			return errors.Is(err, context.DeadlineExceeded)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Let the first page through, fail the second.
			var once sync.Once
			hc := &http.Client{Transport: hookTransport{after: func(*http.Request) {
				once.Do(func() { s.SetFault(sdcsim.RouteListVMs, tc.fault) })
			}}}
			c, _ := sdc.NewVMAPI(sdc.VMAPIOptions{Address: s.VMAPIURL(), Limit: 100}, hc, 500*time.Millisecond)
			vms, err := c.ListAllVMs(ctxT(t), sdc.VMFilter{State: "active"})
			if err == nil || vms != nil || !tc.check(err) {
				t.Fatalf("got %d VMs, err %v", len(vms), err)
			}
			s.ClearFault(sdcsim.RouteListVMs)
		})
	}
	// An out-of-range limit is VMAPI's 409 with the field named.
	_, err := c.ListVMs(ctxT(t), sdc.VMFilter{}, 5000, "", 0)
	var ae *sdc.APIError
	if !errors.As(err, &ae) || ae.Status != 409 || len(ae.Errors) == 0 || ae.Errors[0].Field != "limit" {
		t.Fatalf("limit 5000: %v", err)
	}
}

func TestVMAPIGetVM(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 5, Seed: 6})
	s := startSim(t, inv, sdcsim.Options{})
	c, _ := sdc.NewVMAPI(sdc.VMAPIOptions{Address: s.VMAPIURL()}, nil, 0)
	id := inv.VMs[0].UUID
	vm, err := c.GetVM(ctxT(t), id)
	if err != nil || vm.UUID != id || vm.State != "running" || len(vm.NICs) != 1 {
		t.Fatalf("get: %+v %v", vm, err)
	}
	s.DestroyVM(id)
	if vm, err = c.GetVM(ctxT(t), id); err != nil || vm.State != "destroyed" || !vm.Destroyed.Set {
		t.Fatalf("destroyed VM: %+v %v", vm, err)
	}
	if _, err := c.GetVM(ctxT(t), "00000000-0000-4000-8000-000000000000"); !errors.Is(err, sdc.ErrNotFound) {
		t.Fatalf("unknown VM: %v, want ErrNotFound", err)
	}
	s.SetFault(sdcsim.RouteGetVM, sdcsim.Fault{Times: 1, Status: 503})
	if _, err := c.GetVM(ctxT(t), id); err == nil || errors.Is(err, sdc.ErrNotFound) {
		t.Fatalf("503: %v", err)
	}
}

// internal_metadata is not kept, nor the metadata keys CNS's cleanVM
// drops.
func TestVMAPIDecodeTrims(t *testing.T) {
	vm, err := dc.DecodeVM([]byte(`{"uuid":"b6c1f3a2-4c1e-4f6e-9a53-3c8a3bd0e1f7","state":"running","internal_metadata":{"docker:cmd":"x"},
		"customer_metadata":{"user-script":"#!/bin/sh","root_authorized_keys":"ssh-rsa","triton.cns.status":"up"},"tags":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if vm.InternalMetadata != nil || len(vm.CustomerMetadata) != 1 {
		t.Fatalf("kept %v %v", vm.InternalMetadata, vm.CustomerMetadata)
	}
	if _, err := dc.DecodeVM([]byte(`{"uuid":"nope"}`)); err == nil {
		t.Fatal("a VM without a UUID decoded")
	}
}

func TestCNAPIListServers(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 10, Seed: 8})
	s := startSim(t, inv, sdcsim.Options{})
	// More than one page of set-up servers, and one not set up.
	for i := range 1500 {
		hb := "2026-01-01T00:00:00.000Z"
		s.PutServer(dc.Server{UUID: fmt.Sprintf("%08x-0000-4000-8000-000000000000", i), Hostname: fmt.Sprintf("x%d", i),
			Setup: i != 7, Status: "running", LastHeartbeat: &hb, LastBoot: "2025-01-01T00:00:00.000Z",
			Sysinfo: map[string]any{"Admin NIC Tag": "admin_rack_1"}})
	}
	c, _ := sdc.NewCNAPI(sdc.APIOptions{Address: s.CNAPIURL()}, nil, 0)
	servers, err := c.ListServers(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := 1500 - 1 + len(inv.Servers); len(servers) != want {
		t.Fatalf("%d servers, want %d", len(servers), want)
	}
	for _, srv := range servers {
		if !srv.Setup || srv.Status != "running" || srv.LastHeartbeat == nil || srv.Sysinfo == nil {
			t.Fatalf("server %+v", srv)
		}
	}
	if got := servers[0].AdminNICTag(); got != "admin_rack_1" {
		t.Errorf("admin tag %q", got)
	}
	s.SetFault(sdcsim.RouteListServers, sdcsim.Fault{Times: 1, Status: 500})
	if _, err := c.ListServers(ctxT(t)); err == nil {
		t.Fatal("500 not an error")
	}
}

func TestNAPIListings(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 10, Seed: 9})
	s := startSim(t, inv, sdcsim.Options{})
	for i := range 1100 {
		s.PutNetwork(dc.Network{UUID: fmt.Sprintf("%08x-1111-4000-8000-000000000000", i), Name: fmt.Sprintf("n%d", i),
			Subnet: "10.1.0.0/16", NICTag: "external"})
	}
	c, _ := sdc.NewNAPI(sdc.APIOptions{Address: s.NAPIURL()}, nil, 0)
	nets, err := c.ListNetworks(ctxT(t))
	if err != nil || len(nets) != 1100+len(inv.Networks) {
		t.Fatalf("networks: %d %v", len(nets), err)
	}
	pools, err := c.ListNetworkPools(ctxT(t))
	if err != nil || len(pools) != 1 || pools[0].UUID != sdcsim.ExternalPool || len(pools[0].Networks) != 1 {
		t.Fatalf("pools: %+v %v", pools, err)
	}
	if n, err := c.GetNetwork(ctxT(t), sdcsim.AdminNetwork); err != nil || n.NICTag != "admin" {
		t.Fatalf("get network: %+v %v", n, err)
	}
	if _, err := c.GetNetwork(ctxT(t), "00000000-2222-4000-8000-000000000000"); !errors.Is(err, sdc.ErrNotFound) {
		t.Fatalf("unknown network: %v", err)
	}
}

func TestUFDSClient(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 10, Seed: 10})
	s := startSim(t, inv, sdcsim.Options{})
	alice := inv.Users[0]

	for _, tc := range []struct {
		name string
		opts sdc.UFDSOptions
		ok   bool
	}{
		{"ldaps verified", sdc.UFDSOptions{Address: s.LDAPSURL(), CAFile: s.CACertFile()}, true},
		{"ldaps unverified", sdc.UFDSOptions{Address: s.LDAPSURL()}, true},
		{"ldap", sdc.UFDSOptions{Address: s.LDAPURL()}, true},
		{"wrong password", sdc.UFDSOptions{Address: s.LDAPURL(), BindPassword: "nope"}, false},
		{"wrong CA", sdc.UFDSOptions{Address: s.LDAPSURL(), CAFile: otherCA(t)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.opts.BindDN == "" {
				tc.opts.BindDN = s.RootDN()
			}
			if tc.opts.BindPassword == "" {
				tc.opts.BindPassword = s.RootPassword()
			}
			c, err := sdc.NewUFDS(tc.opts, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			u, err := c.GetUser(ctxT(t), alice.UUID)
			if !tc.ok {
				if err == nil {
					t.Fatal("looked up with bad credentials or an untrusted certificate")
				}
				return
			}
			if err != nil || *u != alice {
				t.Fatalf("by uuid: %+v %v", u, err)
			}
			if u, err = c.GetUser(ctxT(t), alice.Login); err != nil || u.UUID != alice.UUID {
				t.Fatalf("by login: %+v %v", u, err)
			}
		})
	}

	c, _ := sdc.NewUFDS(sdc.UFDSOptions{Address: s.LDAPURL(), BindDN: s.RootDN(), BindPassword: s.RootPassword()}, 2*time.Second)
	defer c.Close()
	if _, err := c.GetUser(ctxT(t), "nobody"); !errors.Is(err, sdc.ErrNotFound) {
		t.Fatalf("unknown user: %v", err)
	}
	// A filter-injection attempt is just a strange login.
	if _, err := c.GetUser(ctxT(t), "*)(uuid=*"); !errors.Is(err, sdc.ErrNotFound) {
		t.Fatalf("escaped filter: %v", err)
	}
	s.AddUser(dc.User{UUID: "0f0f0f0f-0000-4000-8000-000000000001", Login: alice.Login})
	if _, err := c.GetUser(ctxT(t), alice.Login); !errors.Is(err, sdc.ErrAmbiguousUser) {
		t.Fatalf("two accounts, one login: %v", err)
	}

	// UFDS down: an error; back up: the client dials again.
	s.SetLDAPDown(true)
	if _, err := c.GetUser(ctxT(t), alice.UUID); err == nil {
		t.Fatal("UFDS down, lookup succeeded")
	}
	s.SetLDAPDown(false)
	if _, err := c.GetUser(ctxT(t), alice.UUID); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	// Connections reset while idle: the search is retried on a new one.
	for range 3 {
		s.ResetLDAPConns()
		if _, err := c.GetUser(ctxT(t), alice.UUID); err != nil {
			t.Fatalf("after a reset: %v", err)
		}
	}
}

func otherCA(t *testing.T) string {
	other, err := sdcsim.New(dc.Inventory{}, sdcsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pem := other.CACertPEM()
	other.Close()
	p := filepath.Join(t.TempDir(), "other.pem")
	os.WriteFile(p, pem, 0o644)
	return p
}

func TestUFDSChangelog(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 10, Seed: 11})
	s := startSim(t, inv, sdcsim.Options{})
	c, _ := sdc.NewUFDS(sdc.UFDSOptions{Address: s.LDAPSURL(), BindDN: s.RootDN(), BindPassword: s.RootPassword()}, 2*time.Second)
	defer c.Close()
	u := inv.Users[0]

	// The number gains a digit: compared as integers, 1000000 > 999999.
	s.SetChangeNumber(999998)
	s.SetUserFlag(u.UUID, "triton_cns_enabled", "false")
	first, err := c.LatestChangeNumber(ctxT(t))
	if err != nil || first != 999999 {
		t.Fatalf("latest: %d %v", first, err)
	}
	s.SetUserFlag(u.UUID, "approved_for_provisioning", "")        // delete
	s.SetUserAttrs(u.UUID, map[string]string{"login": "renamed"}) // rename
	s.AppendChangelog(sdcsim.ChangelogEntry{TargetDN: "uuid=" + "0f0f0f0f-0000-4000-8000-000000000002, uuid=" + u.UUID + ", ou=users, o=smartdc",
		ChangeType: "modify", Changes: `[{"operation":"replace","modification":{"type":"triton_cns_enabled","vals":["true"]}}]`})
	s.AddUser(dc.User{UUID: "0f0f0f0f-0000-4000-8000-000000000003", Login: "newbie", TritonCNSEnabled: "true"})
	latest, _ := c.LatestChangeNumber(ctxT(t))
	if latest != 1000003 {
		t.Fatalf("latest %d", latest)
	}
	entries, err := c.ChangesSince(ctxT(t), first, sdc.ChangelogPage)
	if err != nil || len(entries) != 5 {
		t.Fatalf("changes: %d %v", len(entries), err)
	}
	type want struct {
		account string
		ok      bool
		touches string
	}
	for i, w := range []want{
		{u.UUID, true, "triton_cns_enabled"},
		{u.UUID, true, "approved_for_provisioning"},
		{u.UUID, true, "login"},
		{"", false, "triton_cns_enabled"},                                    // a sub-user
		{"0f0f0f0f-0000-4000-8000-000000000003", true, "triton_cns_enabled"}, // add: object form
	} {
		e := entries[i]
		id, ok := e.AccountUUID()
		if ok != w.ok || (ok && id != w.account) || !e.Touches(w.touches) {
			t.Errorf("entry %d (%d %s %s %v): account %q %v", i, e.Number, e.ChangeType, e.TargetDN, e.Attrs, id, ok)
		}
	}

	// More than a page between two reads: paging by number sees them all.
	for i := range 2500 {
		s.SetUserFlag(u.UUID, "triton_cns_enabled", []string{"true", "false"}[i%2])
	}
	seen := 0
	for from := latest + 1; ; {
		page, err := c.ChangesSince(ctxT(t), from, sdc.ChangelogPage)
		if err != nil {
			t.Fatal(err)
		}
		seen += len(page)
		if len(page) < sdc.ChangelogPage {
			break
		}
		from = page[len(page)-1].Number + 1
	}
	if seen != 2500 {
		t.Fatalf("paged %d entries, want 2500", seen)
	}
}

// The listener reports the bootstrap, change items (with and without
// resourceObject, before the bootstrap too), and reconnects with a new
// bootstrap after every kind of disconnection.
func TestChangefeedListener(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 5, Seed: 12})
	s := startSim(t, inv, sdcsim.Options{ResourceObject: true})
	cf, err := sdc.NewChangefeed(sdc.VMAPIOptions{Address: s.VMAPIURL()},
		sdc.ChangefeedOptions{Instance: "0f0f0f0f-0000-4000-8000-00000000cafe"}, nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cf.PingInterval, cf.PongTimeout = 50*time.Millisecond, 200*time.Millisecond
	cf.RetryMin, cf.RetryMax = 20*time.Millisecond, 100*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan sdc.ChangefeedEvent, 100)
	done := make(chan struct{})
	go func() { cf.Run(ctx, events); close(done) }()
	defer func() { cancel(); <-done }()

	next := func(what string, match func(sdc.ChangefeedEvent) bool) sdc.ChangefeedEvent {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case ev := <-events:
				if match(ev) {
					return ev
				}
			case <-deadline:
				t.Fatalf("no %s event", what)
			}
		}
	}
	isBoot := func(ev sdc.ChangefeedEvent) bool { return ev.Bootstrap }
	isErr := func(ev sdc.ChangefeedEvent) bool { return ev.Err != nil }
	next("bootstrap", isBoot)

	id := inv.VMs[1].UUID
	s.SetAlias(id, "renamed")
	ev := next("change", func(ev sdc.ChangefeedEvent) bool { return ev.Change != nil })
	if ev.Change.UUID != id || ev.Change.Object == nil || ev.Change.Object.AliasString() != "renamed" ||
		!slices.Contains(ev.Change.SubResources, "alias") {
		t.Fatalf("change %+v", ev.Change)
	}

	for _, how := range []sdcsim.DropMode{sdcsim.DropClose, sdcsim.DropReset, sdcsim.DropHalfOpen} {
		s.DropFeeds(how)
		ev := next(fmt.Sprintf("error after drop %d", how), isErr)
		// A half-open connection is noticed only by its missing pongs.
		if how == sdcsim.DropHalfOpen && !strings.Contains(ev.Err.Error(), "no pong") {
			t.Fatalf("half-open connection ended by %v, want the pong deadline", ev.Err)
		}
		next(fmt.Sprintf("bootstrap after drop %d", how), isBoot)
	}

	s.SendFeedFrame("{not json")
	if ev := next("error after a malformed frame", isErr); !strings.Contains(ev.Err.Error(), "malformed") {
		t.Fatalf("malformed frame: %v", ev.Err)
	}
	next("bootstrap after a malformed frame", isBoot)

	s.SetFeedFaults(sdcsim.FeedFaults{RefuseUpgrade: 503})
	s.DropFeeds(sdcsim.DropReset)
	next("error", isErr)
	if ev := next("refused upgrade", isErr); !strings.Contains(ev.Err.Error(), "503") {
		t.Fatalf("refused upgrade: %v", ev.Err)
	}
	s.SetFeedFaults(sdcsim.FeedFaults{ChangeBeforeBootstrap: true, DoubleBootstrap: true})
	next("change before the bootstrap", func(ev sdc.ChangefeedEvent) bool { return ev.Change != nil })
	next("bootstrap", isBoot)
	next("second bootstrap", isBoot)
}
