package sdcsim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
)

const (
	ownerA   = "930896af-bf8c-48d4-885c-6573a94b1853"
	ownerB   = "a1b2c3d4-0000-4000-8000-0000000000b0"
	serverA  = "44454c4c-4800-1034-804a-b2c04f354d31"
	serverB  = "44454c4c-4800-1034-804a-b2c04f354d32"
	serverC  = "44454c4c-4800-1034-804a-b2c04f354d30" // not set up
	netExt   = "c9306c59-f0d6-4aa0-aa0c-17d22a6a3f0f"
	netFab   = "0b2f6a4e-5d71-4c6a-a5b0-2bd1c4e5a7d1"
	netAdmin = "fb7dca69-31c9-4f56-9c9a-5866a1aa4f40"
	poolExt  = "3b5913ec-42e6-4803-9c0b-c9b1c5603520"
)

// vmID makes the uuid of test VM i; the uuids sort in the order of i.
func vmID(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i) }

func ptr[T any](v T) *T { return &v }

func testVM(i int, state string) dc.VM {
	return dc.VM{
		UUID:       vmID(i),
		Alias:      ptr(fmt.Sprintf("vm%d", i)),
		OwnerUUID:  ownerA,
		ServerUUID: serverA,
		State:      state,
		Brand:      "joyent",
		NICs: []dc.NIC{{
			Interface:   "net0",
			MAC:         fmt.Sprintf("90:b8:d0:00:00:%02x", i),
			VLANID:      ptr(0),
			NICTag:      "external",
			IP:          fmt.Sprintf("198.51.100.%d", i),
			IPs:         []string{fmt.Sprintf("198.51.100.%d/24", i)},
			NetworkUUID: netExt,
			Primary:     true,
		}},
		Tags:             map[string]any{"triton.cns.services": "web"},
		CustomerMetadata: map[string]any{},
	}
}

// testInventory: VMs 1..8, of which 6 is stopped, 7 destroyed, 8 failed;
// VM 9 belongs to ownerB on serverB and has a legacy NIC.
func testInventory() dc.Inventory {
	inv := dc.Inventory{
		Servers: []dc.Server{
			{UUID: serverA, Hostname: "cn1", Setup: true, Status: "running", LastHeartbeat: ptr("2024-05-01T12:00:03.118Z"),
				LastBoot: "2024-04-20T08:00:11.000Z", Sysinfo: map[string]any{"Admin NIC Tag": "admin"}},
			{UUID: serverB, Hostname: "cn2", Setup: true, Status: "unknown", TransitionalStatus: "rebooting",
				LastBoot: "2024-04-20T08:00:11.000Z"},
			{UUID: serverC, Hostname: "cn0", Setup: false, Status: "running", LastBoot: "2024-04-20T08:00:11.000Z"},
		},
		Users: []dc.User{
			{UUID: ownerA, Login: "alice", TritonCNSEnabled: "true", ApprovedForProvisioning: "true"},
			{UUID: ownerB, Login: "bob"},
		},
		Networks: []dc.Network{
			{UUID: netExt, Name: "external", Subnet: "198.51.100.0/24", VLANID: ptr(0), NICTag: "external"},
			{UUID: netFab, Name: "My-Fabric-Network", Subnet: "192.168.128.0/22", VLANID: ptr(2), NICTag: "sdc_overlay",
				OwnerUUIDs: []string{ownerB}, Fabric: true},
			{UUID: netAdmin, Name: "admin", Subnet: "10.99.99.0/24", VLANID: ptr(0), NICTag: "admin"},
		},
		NetworkPools: []dc.NetworkPool{
			{UUID: poolExt, Name: "external-pool", Networks: []string{netExt}},
		},
	}
	for i := 1; i <= 8; i++ {
		state := "running"
		switch i {
		case 6:
			state = "stopped"
		case 7:
			state = "destroyed"
		case 8:
			state = "failed"
		}
		inv.VMs = append(inv.VMs, testVM(i, state))
	}
	legacy := testVM(9, "running")
	legacy.OwnerUUID, legacy.ServerUUID = ownerB, serverB
	legacy.NICs = []dc.NIC{{MAC: "90:b8:d0:00:00:09", NICTag: "sdc_overlay/7262881", IP: "192.168.128.9"}}
	inv.VMs = append(inv.VMs, legacy)
	return inv
}

func startSim(t *testing.T, opts Options) *Sim {
	t.Helper()
	s, err := New(testInventory(), opts)
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

var httpClient = &http.Client{Timeout: 10 * time.Second}

// get does a GET and decodes a JSON body into v (when v is not nil).
func get(t *testing.T, base, path string, v any) (int, http.Header) {
	t.Helper()
	resp, err := httpClient.Get(base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read: %v", path, err)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %d %q: %v", path, resp.StatusCode, body, err)
		}
	}
	return resp.StatusCode, resp.Header
}

func marker(uuid string) string {
	return url.QueryEscape(`{"uuid":"` + uuid + `"}`)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
