package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// More of the demo data center (testdata/inventory.json): zone cnsZone
// lists the pool dcPool (dcExternal and dcExt2), intZone takes the rest.
const (
	dcFabric  = "b3659b7a-cf1f-4d3f-a77f-899e12cb2706" // alice's My-Fabric-Network
	vmWeb2    = "f47889c3-2578-42e6-a1e6-7d0ef46e7fd6" // alice's, running, destroyed by the test
	vmDB1     = "b9974d54-9a8f-4f94-b667-d41ae9d26935" // alice's, stopped
	vmScratch = "05376f2a-e500-4960-9e17-c0a25b1816bf" // alice's, triton.cns.disable
	vmWebOld  = "f9fd1c29-beb7-4e52-939c-c38bc4b5edc0" // alice's, destroyed before cns started
	vmNowhere = "00c0ffee-0000-4000-8000-000000000001" // VMAPI never had it
)

// CloudAPI's view of an account (req.account, from UFDS).
func account(uuid string, cns bool) map[string]any {
	a := map[string]any{"uuid": uuid}
	if cns {
		a["triton_cns_enabled"] = "true"
	}
	return a
}

// suffixesIn is what cns answers for owner on networks that land in
// zones.
func suffixesIn(owner string, zones ...string) []any {
	var out []any
	for _, z := range zones {
		out = append(out, "svc."+owner+"."+z, "inst."+owner+"."+z)
	}
	return out
}

func strs(v any) []string {
	list, _ := v.([]any)
	out := []string{}
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// startCloudAPIAgainstSim runs cns on the SDC simulator with its API on
// 127.0.0.1, NAPI's pools polled rarely (a pool created during the test
// is unknown to the model), and CloudAPI's client side against it.
func startCloudAPIAgainstSim(t *testing.T, pingInterval time.Duration) (*sdcsim.Sim, *sdcCNS, *cloudapi) {
	t.Helper()
	cloudapiDeps(t) // skip before starting anything
	sim := startSim(t, sdcsim.Options{PlainLDAPInConfig: true})
	fc := testFeedConfig(t, sim)
	fc.NAPIInterval = time.Hour
	fc.keys["api_server"] = json.RawMessage(`{"listen": "127.0.0.1:0"}`)
	c := startSDCCNS(t, filepath.Join(t.TempDir(), "cns.db"), fc)
	c.synced(30 * time.Second)
	return sim, c, startCloudAPI(t, strings.TrimPrefix(c.api, "http://"), pingInterval)
}

// GetMachine shows as dns_names what GET /vm/:uuid lists (in the
// reference's order: instance names first) for a listed VM, the instance
// names of a stopped one, none for a de-listed, destroyed or unknown VM
// (CloudAPI turns a 404 into none), and asks nothing for an account
// without CNS.
func TestCloudAPIGetMachine(t *testing.T) {
	sim, c, api := startCloudAPIAgainstSim(t, 30*time.Second)
	client := admin.NewClient(c.api, "")
	ctx := context.Background()
	if err := sim.DestroyVM(vmWeb2); err != nil {
		t.Fatal(err)
	}
	// Its records leave at once (its entry goes at the reaper's next
	// visit: GET /vm is 200 with no names until then, 404 after).
	waitFor(t, "the destroyed VM's names to leave", 20*time.Second, func() bool {
		vm, err := client.VM(ctx, vmWeb2)
		return admin.IsNotFound(err) || err == nil && len(vm.Names) == 0
	})
	listed, err := client.VM(ctx, dcWeb0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		vm   string
		acct map[string]any
		want []string // nil: no dns_names at all
	}{
		{"listed", dcWeb0, account(aliceUUID, true), listed.Names},
		{"stopped: its instance names", vmDB1, account(aliceUUID, true), []string{
			vmDB1 + ".inst." + aliceUUID + "." + intZone,
			"my-fabric-network." + vmDB1 + ".inst." + aliceUUID + "." + intZone,
			vmDB1 + ".inst.alice." + intZone,
			"my-fabric-network." + vmDB1 + ".inst.alice." + intZone,
			"db1.inst." + aliceUUID + "." + intZone,
			"my-fabric-network.db1.inst." + aliceUUID + "." + intZone,
			"db1.inst.alice." + intZone,
			"my-fabric-network.db1.inst.alice." + intZone,
		}},
		{"de-listed", vmScratch, account(aliceUUID, true), []string{}},
		{"destroyed while cns ran", vmWeb2, account(aliceUUID, true), []string{}},
		{"destroyed before", vmWebOld, account(aliceUUID, true), []string{}},
		{"unknown", vmNowhere, account(aliceUUID, true), []string{}},
		{"account without CNS", dcWeb0, account(aliceUUID, false), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := api.do("getMachine", map[string]any{"account": tc.acct, "vm": tc.vm})
			if res["error"] != nil {
				t.Fatalf("GetMachine fails: %v (%v)", res["error"], res["cause"])
			}
			m, _ := res["machine"].(map[string]any)
			got, has := m["dns_names"]
			if tc.want == nil {
				if has {
					t.Errorf("dns_names %v for an account without CNS", got)
				}
				return
			}
			if !slices.Equal(strs(got), tc.want) {
				t.Errorf("dns_names %q, want %q", strs(got), tc.want)
			}
		})
	}
	// The listed VM's first name is its UUID's in its first zone, as the
	// reference lists them.
	if len(listed.Names) == 0 || listed.Names[0] != dcWeb0+".inst."+aliceUUID+"."+cnsZone {
		t.Errorf("GET /vm/%s names start %q", dcWeb0, listed.Names)
	}
}

// CreateMachine takes the first inst. suffix as the new VM's dns_domain
// and dnsify(alias) as its hostname, for an account with VMs, one with
// none yet, one created after a failed attempt; a network pool, a new
// pool NAPI has and the model not yet, a fabric plus an external network,
// no networks. An account UFDS does not have (or UFDS down) fails the
// provisioning, never a VM without or with a wrong DNS domain.
func TestCloudAPICreateMachine(t *testing.T) {
	sim, _, api := startCloudAPIAgainstSim(t, 30*time.Second)
	newbie := dc.User{UUID: "5e1f0c2a-7b3d-4c8e-9a61-0d2b4f6e8a10", Login: "newbie", TritonCNSEnabled: "true", ApprovedForProvisioning: "true"}
	if err := sim.AddUser(newbie); err != nil {
		t.Fatal(err)
	}
	newPool := "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f"
	if err := sim.PutNetworkPool(dc.NetworkPool{UUID: newPool, Name: "new-pool", Networks: []string{dcExt2}}); err != nil {
		t.Fatal(err)
	}
	ghost := dc.User{UUID: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", Login: "ghost", TritonCNSEnabled: "true"}
	net := func(kind, uuid string) map[string]any { return map[string]any{kind: uuid} }
	type want struct {
		dnsDomain, hostname string // empty: provisioned without
		err                 string
	}
	create := func(owner string, networks []map[string]any, w want) {
		t.Helper()
		res := api.do("createMachine", map[string]any{"account": account(owner, true), "owner_uuid": owner,
			"alias": "My_Web 1", "networks": networks})
		if w.err != "" {
			if res["error"] != w.err {
				t.Errorf("owner %s on %v: %v (%v), want the provisioning to fail with %q", owner, networks, res["error"], res["cause"], w.err)
			}
			return
		}
		vm, _ := res["vm"].(map[string]any)
		if res["error"] != nil || vm["dns_domain"] != nilIfEmpty(w.dnsDomain) || vm["hostname"] != nilIfEmpty(w.hostname) {
			t.Errorf("owner %s on %v: %v (%v), want dns_domain %q hostname %q", owner, networks, res, res["cause"], w.dnsDomain, w.hostname)
		}
	}
	const unable = "InternalError: Unable to contact the Triton CNS API"
	create(aliceUUID, []map[string]any{net("ipv4_uuid", dcExternal)}, want{"inst.alice." + cnsZone, "my-web-1", ""})
	create(aliceUUID, []map[string]any{net("uuid", dcPool)}, want{"inst.alice." + cnsZone, "my-web-1", ""})
	create(aliceUUID, []map[string]any{net("uuid", newPool)}, want{"inst.alice." + cnsZone, "my-web-1", ""})
	create(aliceUUID, []map[string]any{net("ipv4_uuid", dcFabric), net("ipv4_uuid", dcExternal)}, want{"inst.alice." + intZone, "my-web-1", ""})
	create(aliceUUID, []map[string]any{}, want{"", "", ""})
	create(newbie.UUID, []map[string]any{net("ipv4_uuid", dcExternal)}, want{"inst.newbie." + cnsZone, "my-web-1", ""})
	create(ghost.UUID, []map[string]any{net("ipv4_uuid", dcExternal)}, want{err: unable})
	if err := sim.AddUser(ghost); err != nil {
		t.Fatal(err)
	}
	create(ghost.UUID, []map[string]any{net("ipv4_uuid", dcExternal)}, want{"inst.ghost." + cnsZone, "my-web-1", ""})

	// UFDS down: an account cns holds still gets its domain; one it
	// would have to look up fails the provisioning.
	other := dc.User{UUID: "3f2e1d0c-9b8a-4766-a5b4-c3d2e1f0a9b8", Login: "other", TritonCNSEnabled: "true"}
	if err := sim.AddUser(other); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetLDAPDown(true); err != nil {
		t.Fatal(err)
	}
	create(aliceUUID, []map[string]any{net("ipv4_uuid", dcExternal)}, want{"inst.alice." + cnsZone, "my-web-1", ""})
	create(other.UUID, []map[string]any{net("ipv4_uuid", dcExternal)}, want{err: unable})
	if err := sim.SetLDAPDown(false); err != nil {
		t.Fatal(err)
	}
	create(other.UUID, []map[string]any{net("ipv4_uuid", dcExternal)}, want{"inst.other." + cnsZone, "my-web-1", ""})
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ListNetworks and GetNetwork show each network's suffixes for the
// account; ListNetworks reads them without looking at the error, so a
// failure would kill CloudAPI with a TypeError: shown for an account
// UFDS does not have, never for one it has.
func TestCloudAPINetworks(t *testing.T) {
	sim, _, api := startCloudAPIAgainstSim(t, 30*time.Second)
	newbie := dc.User{UUID: "5e1f0c2a-7b3d-4c8e-9a61-0d2b4f6e8a10", Login: "newbie", TritonCNSEnabled: "true"}
	if err := sim.AddUser(newbie); err != nil {
		t.Fatal(err)
	}
	networks := []map[string]any{
		{"id": dcExternal, "name": "external"},
		{"id": dcPool, "name": "external-pool"},
		{"id": dcFabric, "name": "My-Fabric-Network"},
	}
	wantSuffixes := map[string][]any{
		dcExternal: suffixesIn("newbie", cnsZone),
		dcPool:     suffixesIn("newbie", cnsZone),
		dcFabric:   suffixesIn("newbie", intZone),
	}
	res := api.do("listNetworks", map[string]any{"account": account(newbie.UUID, true), "networks": networks})
	if res["thrown"] != nil || res["warning"] != nil {
		t.Fatalf("ListNetworks: %v", res)
	}
	got, _ := res["networks"].([]any)
	if len(got) != len(networks) {
		t.Fatalf("ListNetworks shows %d networks, want %d: %v", len(got), len(networks), res)
	}
	for _, n := range got {
		m, _ := n.(map[string]any)
		id, _ := m["id"].(string)
		if w := wantSuffixes[id]; !slices.Equal(strs(m["suffixes"]), strs(any(w))) {
			t.Errorf("ListNetworks: %s suffixes %v, want %v", id, m["suffixes"], w)
		}
	}
	res = api.do("getNetwork", map[string]any{"account": account(newbie.UUID, true), "network": networks[1]})
	if m, _ := res["network"].(map[string]any); res["warning"] != nil || !slices.Equal(strs(m["suffixes"]), strs(any(wantSuffixes[dcPool]))) {
		t.Errorf("GetNetwork: %v", res)
	}
	// What a failure would do: CloudAPI's ListNetworks throws.
	res = api.do("listNetworks", map[string]any{"account": account("9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", true), "networks": networks[:1]})
	if thrown, _ := res["thrown"].(string); !strings.HasPrefix(thrown, "TypeError") {
		t.Errorf("ListNetworks for an account UFDS does not have: %v, want CloudAPI's TypeError", res)
	}
}

// sdc-docker: docker run adds the suffixes to docker:dnssearch, or fails
// with "Triton CNS API failed"; its connection watcher pings cns every
// 10 s (scaled here) and marks it unavailable on a failure, which would
// fail every docker request.
func TestDockerCalls(t *testing.T) {
	sim, _, api := startCloudAPIAgainstSim(t, 30*time.Second)
	newbie := dc.User{UUID: "5e1f0c2a-7b3d-4c8e-9a61-0d2b4f6e8a10", Login: "newbie", TritonCNSEnabled: "true"}
	if err := sim.AddUser(newbie); err != nil {
		t.Fatal(err)
	}
	nets := []map[string]any{{"ipv4_uuid": dcExternal, "uuid": dcExternal}}
	res := api.do("dockerDNSSearch", map[string]any{"account": account(newbie.UUID, true), "networks": nets})
	if res["error"] != nil || !slices.Equal(strs(res["dnssearch"]), strs(any(suffixesIn("newbie", cnsZone)))) {
		t.Errorf("docker run, account with no VMs: %v", res)
	}
	res = api.do("dockerDNSSearch", map[string]any{"account": account("9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", true), "networks": nets})
	if res["error"] != "InternalError: Triton CNS API failed" {
		t.Errorf("docker run, account UFDS does not have: %v", res)
	}
	res = api.do("dockerPing", map[string]any{"count": 20, "intervalMs": 50})
	if res["ok"] != 20.0 || res["available"] != true {
		t.Errorf("sdc-docker's pings: %v", res)
	}
}

// CloudAPI's cueball agent checks each idle pooled socket with GET /ping
// every pingInterval (30 s) and closes it on a 5xx or a failure. Time is
// scaled 60 times down (0.5 s between checks) and watched for three
// rounds of checks, a minute and a half of CloudAPI's: every check
// passes, no socket is lost or replaced, and the pool still serves. Scaling is honest only while the
// API keeps idle sockets longer than CloudAPI's real interval, which the
// test checks too.
func TestCloudAPIAgentHealthChecks(t *testing.T) {
	const scale = 60
	if admin.IdleTimeout <= 30*time.Second {
		t.Fatalf("the API closes idle sockets after %v: before CloudAPI's 30 s health checks", admin.IdleTimeout)
	}
	_, _, api := startCloudAPIAgainstSim(t, 30*time.Second/scale)
	// Each idle socket is checked every 0.5 s: three rounds take 1.5 s
	// on a quiet machine; a busy one runs node's timers late, so the
	// harness watches until they are done, up to 40 s.
	res := api.do("health", map[string]any{"rounds": 3, "ms": 40 * 1000})
	before, _ := res["before"].(map[string]any)
	after, _ := res["after"].(map[string]any)
	count := func(side map[string]any, msg string) float64 {
		seen, _ := side["seen"].(map[string]any)
		n, _ := seen[msg].(float64)
		return n
	}
	stats := func(side map[string]any) map[string]any {
		s, _ := side["stats"].(map[string]any)
		return s
	}
	ok := count(after, "health check ok, releasing") - count(before, "health check ok, releasing")
	spares := stats(before)["totalConnections"].(float64)
	if ok < spares*3 {
		t.Errorf("%v health checks passed in 40 s over %v sockets, want three rounds: %v", ok, spares, spares*3)
	}
	for _, bad := range []string{"got a 5xx code, closing", "check failed"} {
		if n := count(after, bad); n != 0 {
			t.Errorf("cueball: %q %v times", bad, n)
		}
	}
	if b, a := stats(before), stats(after); a["totalConnections"] != b["totalConnections"] || spares < 4 {
		t.Errorf("pool before %v, after %v: sockets lost or replaced", b, a)
	}
	counters, _ := stats(after)["counters"].(map[string]any)
	for _, bad := range []string{"error-while-connected", "close-during-connect", "error-during-connect", "failed-state", "retries-exhausted"} {
		if n := counters[bad]; n != nil {
			t.Errorf("cueball counter %s = %v", bad, n)
		}
	}
	if res := api.do("getMachine", map[string]any{"account": account(aliceUUID, true), "vm": dcWeb0}); res["error"] != nil {
		t.Errorf("after the checks: %v", res)
	}
}
