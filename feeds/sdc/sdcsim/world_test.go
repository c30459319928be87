package sdcsim

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/tritondatacenter/cns/feeds/dc"
)

func TestChangedKeys(t *testing.T) {
	doc := func(s string) map[string]any { return decodeDoc([]byte(s)) }
	for _, tc := range []struct {
		name     string
		old, cur string
		want     []string
	}{
		{"same", `{"a":1,"n":[{"ip":"x"}]}`, `{"a":1,"n":[{"ip":"x"}]}`, nil},
		{"scalar", `{"state":"running"}`, `{"state":"stopped"}`, []string{"state"}},
		{"null to string", `{"destroyed":null}`, `{"destroyed":"2024-01-01T00:00:00.000Z"}`, []string{"destroyed"}},
		{"two nic fields", `{"nics":[{"ip":"a","ips":["a/24"]}]}`, `{"nics":[{"ip":"b","ips":["b/24"]}]}`, []string{"nics", "nics"}},
		{"nic added", `{"nics":[{"ip":"a"}]}`, `{"nics":[{"ip":"a"},{"ip":"b"}]}`, []string{"nics"}},
		{"key added and removed", `{"tags":{"a":"1"}}`, `{"tags":{"b":"1"}}`, []string{"tags", "tags"}},
		{"key appears", `{}`, `{"alias":null,"x":{}}`, []string{"alias", "x"}},
		{"type change", `{"tags":{}}`, `{"tags":[]}`, []string{"tags"}},
		{"number", `{"ram":1024}`, `{"ram":2048}`, []string{"ram"}},
	} {
		if got := changedKeys(doc(tc.old), doc(tc.cur)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestModifyVMNoopPublishesNothing(t *testing.T) {
	s := startSim(t, Options{})
	before, _ := s.VM(vmID(1))
	if err := s.ModifyVM(vmID(1), func(vm *dc.VM) {}); err != nil {
		t.Fatal(err)
	}
	if after, _ := s.VM(vmID(1)); after.LastModified != before.LastModified {
		t.Fatal("a no-op modification bumped last_modified")
	}
	if err := s.ModifyVM(vmID(1), func(vm *dc.VM) { vm.UUID = vmID(2) }); err == nil {
		t.Fatal("changing the uuid succeeded")
	}
	if err := s.SetTag(vmID(99), "a", "b"); err == nil {
		t.Fatal("mutating a missing VM succeeded")
	}
}

func TestUserChangelogForms(t *testing.T) {
	s := startSim(t, Options{})
	if err := s.SetUserAttrs(ownerA, map[string]string{"triton_cns_enabled": "", "company": "ACME"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveUser(ownerB); err != nil {
		t.Fatal(err)
	}
	n := s.AppendChangelog(ChangelogEntry{
		TargetDN: "uuid=" + vmID(50) + ", uuid=" + ownerA + ", ou=users, o=smartdc", ChangeType: "modify",
		Changes: `[{"operation":"replace","modification":{"type":"email","vals":["x@y"]}}]`,
	})
	if n != 3 || s.LatestChangeNumber() != 3 {
		t.Fatalf("numbers: appended %d, latest %d", n, s.LatestChangeNumber())
	}
	s.mu.Lock()
	log := slices.Clone(s.changelog)
	s.mu.Unlock()
	var changes []map[string]any
	if err := json.Unmarshal([]byte(log[0].Changes), &changes); err != nil {
		t.Fatal(err)
	}
	// Sorted by attribute: company replaced, triton_cns_enabled deleted.
	if len(changes) != 2 || changes[0]["operation"] != "replace" || changes[1]["operation"] != "delete" {
		t.Fatalf("modify changes %s", log[0].Changes)
	}
	var entry map[string][]string
	if err := json.Unmarshal([]byte(log[0].Entry), &entry); err != nil || entry["company"][0] != "ACME" || entry["triton_cns_enabled"] != nil {
		t.Fatalf("modify entry %s: %v", log[0].Entry, err)
	}
	if log[1].ChangeType != "delete" || log[1].TargetDN != "uuid="+ownerB+", ou=users, o=smartdc" {
		t.Fatalf("delete entry %+v", log[1])
	}
	if err := s.SetChangeNumber(1); err == nil {
		t.Fatal("SetChangeNumber went backwards")
	}
}

func TestApply(t *testing.T) {
	s := startSim(t, Options{})
	old := testInventory()
	cur := testInventory()
	cur.Networks = cur.Networks[:2]           // admin network removed
	cur.Networks[0].Name = "external-renamed" // changed
	cur.NetworkPools[0].Networks = []string{netExt, netFab}
	cur.Servers[0].Status = "unknown"
	cur.Servers = cur.Servers[:2] // serverC removed
	cur.Users = append(cur.Users, dc.User{UUID: vmID(60), Login: "dave"})
	cur.Users[0].ApprovedForProvisioning = "false"
	cur.VMs[0].State = "stopped"
	cur.VMs = append(cur.VMs, testVM(30, "running"))

	ws := dialFeed(t, s, "apply", VMSubResources)
	readBootstrap(t, ws)
	if n := s.Apply(old, cur); n != 9 {
		t.Errorf("Apply made %d mutations, want 9", n)
	}
	got := map[string]bool{}
	for range 2 {
		got[readItem(t, ws).ChangedResourceID] = true
	}
	if !got[vmID(1)] || !got[vmID(30)] {
		t.Errorf("items for %v, want VMs 1 and 30", got)
	}
	inv := s.Inventory()
	if len(inv.Networks) != 2 || inv.Networks[0].Name == "" || len(inv.Servers) != 2 || len(inv.Users) != 3 {
		t.Errorf("after Apply: %d networks, %d servers, %d users", len(inv.Networks), len(inv.Servers), len(inv.Users))
	}
	if u, _ := s.User(ownerA); u.ApprovedForProvisioning != "false" {
		t.Errorf("user A: %+v", u)
	}
	if s.LatestChangeNumber() != 2 {
		t.Errorf("changelog: %d entries, want add + modify", s.LatestChangeNumber())
	}
}

func TestUnencodableValuesAreErrors(t *testing.T) {
	s := startSim(t, Options{})
	if err := s.SetTag(vmID(1), "bad", func() {}); err == nil {
		t.Fatal("a func tag value was accepted")
	}
	inv := testInventory()
	inv.VMs[0].CustomerMetadata["bad"] = make(chan int)
	if _, err := New(inv, Options{}); err == nil {
		t.Fatal("New accepted an unencodable VM")
	}
}
