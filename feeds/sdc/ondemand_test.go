package sdc_test

import (
	"testing"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// onDemandFeed runs a feed on sim, with cfg's intervals, until the test
// ends, once its first listing is applied (the feed's own UFDS and NAPI
// requests for it are then over).
func onDemandFeed(t *testing.T, sim *sdcsim.Sim, cfg sdc.Config) *sdc.Feed {
	t.Helper()
	cfg.Endpoints = simEndpoints(t, sim)
	f, _ := runFeed(t, cfg)
	return f
}

// The API's questions about accounts the feed has not listed (a new
// account provisioning its first VM) are UFDS lookups as the reference
// makes them; the answers are kept a while, "not found" is not.
func TestAccountOnDemand(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 10, Seed: 21})
	sim := startSim(t, inv, sdcsim.Options{PlainLDAPInConfig: true})
	alice := inv.Users[0]
	// No full listing, no changelog check during the test: every UFDS
	// search it counts is the API's.
	f := onDemandFeed(t, sim, sdc.Config{FullPollInterval: time.Hour, UFDSInterval: time.Hour, RequestTimeout: time.Second})
	ctx := ctxT(t)
	searches := func() int { return sim.Requests(sdcsim.RouteLDAPSearch) }

	newbie := dc.User{UUID: "5e1f0c2a-7b3d-4c8e-9a61-0d2b4f6e8a10", Login: "newbie", TritonCNSEnabled: "true"}
	if _, found, err := f.Account(ctx, newbie.UUID); found || err != nil {
		t.Fatalf("an account UFDS does not have: found %v, err %v", found, err)
	}
	// Created a moment later: found at once, the "not found" was not kept.
	if err := sim.AddUser(newbie); err != nil {
		t.Fatal(err)
	}
	usr, found, err := f.Account(ctx, newbie.UUID)
	if !found || err != nil || usr != newbie {
		t.Fatalf("account with no VMs: %+v %v %v", usr, found, err)
	}
	if usr, found, _ := f.Account(ctx, "newbie"); !found || usr.UUID != newbie.UUID {
		t.Fatalf("by login: %+v %v", usr, found)
	}
	// Kept: asking again does not search.
	before := searches()
	for range 5 {
		if _, found, _ := f.Account(ctx, newbie.UUID); !found {
			t.Fatal("kept answer lost")
		}
	}
	if n := searches() - before; n != 0 {
		t.Errorf("%d UFDS searches for a kept account", n)
	}

	// Filter characters are values (RFC 4515 escapes), not filter syntax:
	// unescaped, this would be (|(uuid=nobody)(uuid=<alice>)(login=...))
	// and answer with alice's account.
	for _, id := range []string{"nobody)(uuid=" + alice.UUID, "*", alice.Login + ")(|(login=*"} {
		if usr, found, err := f.Account(ctx, id); found || err != nil {
			t.Errorf("account %q: found %+v, err %v; want not found", id, usr, err)
		}
	}

	// UFDS down: an error, not "not found"; a kept answer still serves.
	if err := sim.SetLDAPDown(true); err != nil {
		t.Fatal(err)
	}
	if _, found, err := f.Account(ctx, alice.UUID); found || err == nil {
		t.Errorf("UFDS down: found %v, err %v; want an error", found, err)
	}
	if _, found, err := f.Account(ctx, newbie.UUID); !found || err != nil {
		t.Errorf("UFDS down, kept account: found %v, err %v", found, err)
	}
	if err := sim.SetLDAPDown(false); err != nil {
		t.Fatal(err)
	}
	if usr, found, err := f.Account(ctx, alice.UUID); !found || err != nil || usr.UUID != alice.UUID {
		t.Errorf("UFDS back: %+v %v %v", usr, found, err)
	}
}

// A login change (the changelog) reaches the kept answer within a
// changelog check, not at its expiry.
func TestAccountOnDemandFollowsChangelog(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 10, Seed: 22})
	sim := startSim(t, inv, sdcsim.Options{PlainLDAPInConfig: true})
	newbie := dc.User{UUID: "6f2a1d3b-8c4e-4d9f-8b72-1e3c5a7f9b21", Login: "newbie"}
	if err := sim.AddUser(newbie); err != nil {
		t.Fatal(err)
	}
	f := onDemandFeed(t, sim, sdc.Config{FullPollInterval: time.Hour, UFDSInterval: 20 * time.Millisecond, RequestTimeout: time.Second})
	ctx := ctxT(t)
	if usr, _, _ := f.Account(ctx, newbie.UUID); usr.Login != "newbie" {
		t.Fatalf("login %q", usr.Login)
	}
	if err := sim.SetUserAttrs(newbie.UUID, map[string]string{"login": "renamed"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the new login", func() bool {
		usr, _, _ := f.Account(ctx, newbie.UUID)
		return usr.Login == "renamed"
	})
}

// Networks and pools no VM uses are NAPI lookups: a network, a pool with
// its networks, neither (not kept), and a NAPI failure.
func TestNetworkOnDemand(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 10, Seed: 23})
	sim := startSim(t, inv, sdcsim.Options{PlainLDAPInConfig: true})
	f := onDemandFeed(t, sim, sdc.Config{FullPollInterval: time.Hour, NAPIInterval: time.Hour, RequestTimeout: time.Second})
	ctx := ctxT(t)
	fabric := dc.Network{UUID: "0b7a3c1e-2d4f-4a6b-8c9d-1e2f3a4b5c6d", Name: "new-fabric", Subnet: "192.168.128.0/24", Fabric: true}
	if err := sim.PutNetwork(fabric); err != nil {
		t.Fatal(err)
	}
	if pool, found, err := f.Network(ctx, fabric.UUID); !found || err != nil || pool != nil {
		t.Fatalf("network: pool %+v found %v err %v", pool, found, err)
	}
	poolID := "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f"
	if _, found, err := f.Network(ctx, poolID); found || err != nil {
		t.Fatalf("nothing there yet: found %v err %v", found, err)
	}
	if err := sim.PutNetworkPool(dc.NetworkPool{UUID: poolID, Name: "new-pool", Networks: []string{fabric.UUID}}); err != nil {
		t.Fatal(err)
	}
	pool, found, err := f.Network(ctx, poolID)
	if !found || err != nil || pool == nil || len(pool.Networks) != 1 || pool.Networks[0] != fabric.UUID {
		t.Fatalf("pool created after a miss: %+v found %v err %v", pool, found, err)
	}
	other := "1d2e3f4a-5b6c-4d7e-8f9a-0b1c2d3e4f5a"
	sim.SetFault(sdcsim.RouteGetNetwork, sdcsim.Fault{Status: 503})
	if _, found, err := f.Network(ctx, other); found || err == nil {
		t.Errorf("NAPI failing: found %v err %v; want an error", found, err)
	}
	// A kept answer needs no NAPI.
	if _, found, err := f.Network(ctx, fabric.UUID); !found || err != nil {
		t.Errorf("kept network while NAPI fails: found %v err %v", found, err)
	}
}
