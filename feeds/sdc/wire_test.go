package sdc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// The wire tests decode payloads copied verbatim from each real service's
// documentation (testdata/wire, README there names every source), with
// the clients cns runs. They are the oracle the simulator cannot be: it
// was written with the clients, so a field name both got wrong would pass
// every other test.

func wireFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/wire/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// serveBodies answers each path with its body, as JSON, on 127.0.0.1.
func serveBodies(t *testing.T, bodies map[string]string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := bodies[r.URL.Path]
		if !ok {
			http.Error(w, `{"code":"ResourceNotFound","message":"not found"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-joyent-resource-count", "1")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func wireCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// VMAPI's two sample VM objects (sdc-vmapi docs/index.md).
func TestWireVMAPIVM(t *testing.T) {
	// The joyent sample has a trailing comma as printed.
	joyent := strings.Replace(wireFile(t, "vmapi-vm-joyent.json"), "],\n}", "]\n}", 1)
	kvm := wireFile(t, "vmapi-vm-kvm.json")
	base := serveBodies(t, map[string]string{
		"/vms/ef375f03-57ca-44a9-bc8d-63aec09fbc37": joyent,
		"/vms/03750e6a-fcf6-4755-85b5-22b8ddf0f1fb": kvm,
		"/vms": "[" + kvm + "]",
	})
	c, err := NewVMAPI(VMAPIOptions{Address: base}, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := c.GetVM(wireCtx(t), "ef375f03-57ca-44a9-bc8d-63aec09fbc37")
	if err != nil {
		t.Fatal(err)
	}
	if vm.UUID != "ef375f03-57ca-44a9-bc8d-63aec09fbc37" || vm.AliasString() != "assets1" || vm.Brand != "joyent" ||
		vm.OwnerUUID != "930896af-bf8c-48d4-885c-6573a94b1853" || vm.ServerUUID != "564d6836-ed2e-18f8-bdf2-e900490a57a1" ||
		vm.State != "running" || vm.ZoneState != "running" || vm.LastModified != "2012-05-16T23:33:12.000Z" ||
		vm.CreateTimestamp != "2012-05-16T23:33:09.809Z" || vm.Destroyed.Set {
		t.Errorf("joyent sample: %+v", vm)
	}
	if vm.Tags["smartdc_role"] != "assets" || vm.CustomerMetadata["host-ip"] != "10.99.99.9" {
		t.Errorf("joyent sample tags %v, customer_metadata %v", vm.Tags, vm.CustomerMetadata)
	}
	if len(vm.NICs) != 1 {
		t.Fatalf("joyent sample nics: %+v", vm.NICs)
	}
	n := vm.NICs[0]
	if n.Interface != "net0" || n.MAC != "90:b8:d0:d6:26:6e" || n.VLANID == nil || *n.VLANID != 0 || n.NICTag != "admin" ||
		n.IP != "10.99.99.192" || n.Netmask != "255.255.255.0" || n.Gateway != "10.99.99.7" || !n.Primary || n.NetworkUUID != "" {
		t.Errorf("joyent sample NIC: %+v", n)
	}

	vm, err = c.GetVM(wireCtx(t), "03750e6a-fcf6-4755-85b5-22b8ddf0f1fb")
	if err != nil {
		t.Fatal(err)
	}
	if vm.Alias != nil || vm.Brand != "kvm" || vm.Destroyed.Set || vm.OwnerUUID != "00000000-0000-0000-0000-000000000000" ||
		vm.ServerUUID != "564d47c4-b845-113b-664f-2a1d85d0020c" || len(vm.NICs) != 1 || vm.NICs[0].IP != "10.99.99.32" ||
		len(vm.Tags) != 0 {
		t.Errorf("kvm sample: %+v", vm)
	}
	page, err := c.ListVMs(wireCtx(t), VMFilter{State: "active"}, 10, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.VMs) != 1 || page.VMs[0].UUID != "03750e6a-fcf6-4755-85b5-22b8ddf0f1fb" || page.Total != 1 {
		t.Errorf("ListVms page of the kvm sample: %+v", page)
	}
}

// CNAPI's server record (sdc-cnapi docs/README.md "Server records").
func TestWireCNAPIServer(t *testing.T) {
	// The documentation elides sysinfo and vms with placeholders.
	rec := wireFile(t, "cnapi-server.json")
	for _, p := range []string{"--- compute node sysinfo ---", "--- compute node vm objects ---"} {
		if !strings.Contains(rec, p) {
			t.Fatalf("placeholder %q not in the sample", p)
		}
		rec = strings.Replace(rec, p, "", 1)
	}
	base := serveBodies(t, map[string]string{"/servers": "[" + rec + "]"})
	c, err := NewCNAPI(APIOptions{Address: base}, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for name, list := range map[string]func() ([]dc.Server, error){
		"ListServers": func() ([]dc.Server, error) { return c.ListServers(wireCtx(t)) },
		"ServerStatus": func() ([]dc.Server, error) {
			return c.ServerStatus(wireCtx(t), []string{"564d4374-d703-b97b-ca9f-7375f05f337c"})
		},
	} {
		servers, err := list()
		if err != nil {
			t.Fatal(name, err)
		}
		if len(servers) != 1 {
			t.Fatalf("%s: %d servers", name, len(servers))
		}
		s := servers[0]
		if s.UUID != "564d4374-d703-b97b-ca9f-7375f05f337c" || s.Hostname != "headnode" || !s.Setup || s.Status != "running" ||
			s.LastHeartbeat == nil || *s.LastHeartbeat != "2014-04-22T08:35:07.776Z" || s.LastBoot != "2014-04-22T07:39:50.000Z" ||
			!s.Headnode || s.Datacenter != "coal" || s.TransitionalStatus != "" || s.Sysinfo == nil {
			t.Errorf("%s: %+v", name, s)
		}
		if st := dc.ServerState(&s, time.Date(2014, 4, 22, 8, 36, 0, 0, time.UTC)); st != dc.CNUp {
			t.Errorf("%s: the sample CN is %v a minute after its heartbeat", name, st)
		}
	}
}

// NAPI's network, pool and NIC samples (sdc-napi docs/index.md).
func TestWireNAPI(t *testing.T) {
	base := serveBodies(t, map[string]string{
		"/networks/dcb499bd-1caf-4ff6-8d70-4e6d5c02dff3": wireFile(t, "napi-network.json"),
		"/networks/2c670e67-bcd1-44c8-b59c-aaf7d8cfa17b": wireFile(t, "napi-network-owned.json"),
		"/network_pools":     wireFile(t, "napi-network-pools.json"),
		"/nics/90b8d0575370": wireFile(t, "napi-nic.json"),
		// sdc-napi lib/models/nic/obj.js serialize, as sdc-apis.md §4
		// quotes it: the documentation's GetNic sample plus network_uuid.
		"/nics/90b8d0575371": `{"mac": "90:b8:d0:57:53:71", "ip": "10.88.88.198", "netmask": "255.255.255.0", "vlan_id": 0,
 "nic_tag": "external", "primary": false, "owner_uuid": "aaaaaaaf-bf8c-48d4-885c-6573a94b1853",
 "belongs_to_uuid": "27391a96-bbbb-bbbb-bbbb-85f948d9c509", "belongs_to_type": "zone",
 "network_uuid": "c9306c59-f0d6-4aa0-aa0c-17d22a6a3f0f", "gateway": "10.88.88.2", "state": "running",
 "resolvers": ["8.8.4.4"], "created_timestamp": "2017-04-01T01:02:03.456Z",
 "modified_timestamp": "2017-05-12T11:22:33.777Z"}`,
	})
	c, err := NewNAPI(APIOptions{Address: base}, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.GetNetwork(wireCtx(t), "dcb499bd-1caf-4ff6-8d70-4e6d5c02dff3")
	if err != nil {
		t.Fatal(err)
	}
	if n.UUID != "dcb499bd-1caf-4ff6-8d70-4e6d5c02dff3" || n.Name != "internal" || n.VLANID == nil || *n.VLANID != 401 ||
		n.Family != "ipv4" || n.Subnet != "10.0.2.0/24" || n.NICTag != "internal" || n.OwnerUUIDs != nil || n.Fabric {
		t.Errorf("GetNetwork sample: %+v", n)
	}
	n, err = c.GetNetwork(wireCtx(t), "2c670e67-bcd1-44c8-b59c-aaf7d8cfa17b")
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "admin" || !slices.Equal(n.OwnerUUIDs, []string{"930896af-bf8c-48d4-885c-6573a94b1853"}) {
		t.Errorf("UpdateNetwork sample: %+v", n)
	}
	pools, err := c.ListNetworkPools(wireCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(pools) != 2 || pools[0].UUID != "3b5913ec-42e6-4803-9c0b-c9b1c5603520" || pools[0].Name != "internal networks" ||
		!slices.Equal(pools[0].Networks, []string{"0e70de36-a40b-4ac0-9429-819f5ff822bd", "9f2eada0-529b-4673-a377-c249f9240a12"}) ||
		pools[0].NICTag != "internal" || pools[1].Family != "ipv6" {
		t.Errorf("ListNetworkPools sample: %+v", pools)
	}
	nic, err := c.GetNIC(wireCtx(t), "90b8d0575370")
	if err != nil {
		t.Fatal(err)
	}
	if nic.MAC != "90:b8:d0:57:53:70" || nic.IP != "10.88.88.198" || nic.NICTag != "external" ||
		nic.BelongsToUUID != "27391a96-bbbb-bbbb-bbbb-85f948d9c509" || nic.BelongsToType != "zone" || nic.NetworkUUID != "" {
		t.Errorf("GetNic sample: %+v", nic)
	}
	nic, err = c.GetNIC(wireCtx(t), "90b8d0575371")
	if err != nil {
		t.Fatal(err)
	}
	if nic.NetworkUUID != "c9306c59-f0d6-4aa0-aa0c-17d22a6a3f0f" {
		t.Errorf("serialized NIC: network %q", nic.NetworkUUID)
	}
}

// parseLDIF reads one LDIF record as an LDAP search result entry:
// "attr: value" lines, continuation lines (a leading space) joined.
func parseLDIF(t *testing.T, text string) *ldap.Entry {
	t.Helper()
	var lines []string
	for l := range strings.SplitSeq(strings.TrimRight(text, "\n"), "\n") {
		if strings.HasPrefix(l, " ") && len(lines) > 0 {
			lines[len(lines)-1] += l[1:]
			continue
		}
		lines = append(lines, l)
	}
	e := &ldap.Entry{}
	for _, l := range lines {
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			t.Fatalf("LDIF line %q", l)
		}
		if k == "dn" {
			e.DN = v
			continue
		}
		if i := slices.IndexFunc(e.Attributes, func(a *ldap.EntryAttribute) bool { return a.Name == k }); i >= 0 {
			e.Attributes[i].Values = append(e.Attributes[i].Values, v)
		} else {
			e.Attributes = append(e.Attributes, &ldap.EntryAttribute{Name: k, Values: []string{v}})
		}
	}
	return e
}

// UFDS's sample entries (sdc-ufds docs/index.md).
func TestWireUFDS(t *testing.T) {
	usr, err := userFromEntry(parseLDIF(t, wireFile(t, "ufds-user.ldif")))
	if err != nil {
		t.Fatal(err)
	}
	if *usr != (dc.User{UUID: "930896af-bf8c-48d4-885c-6573a94b1853", Login: "admin"}) {
		t.Errorf("admin entry: %+v", usr)
	}
	usr, err = userFromEntry(parseLDIF(t, wireFile(t, "ufds-subuser.ldif")))
	if err != nil {
		t.Fatal(err)
	}
	if usr.UUID != "155ff4f6-f7c8-427e-bad6-5a7fbaa1bd7d" || usr.Login != "a78960b9" || usr.ApprovedForProvisioning != "false" {
		t.Errorf("sub-user entry: %+v", usr)
	}
	ce, err := changelogFromEntry(parseLDIF(t, wireFile(t, "ufds-changelog-add.ldif")))
	if err != nil {
		t.Fatal(err)
	}
	if ce.Number != 1319561108253 || ce.ChangeType != "add" ||
		ce.TargetDN != "uuid=930896af-bf8c-48d4-885c-6573a94b1853, ou=operators, o=smartdc" || !ce.Touches("login") {
		t.Errorf("changelog entry: %+v", ce)
	}
	if _, ok := ce.AccountUUID(); ok {
		t.Error("an entry under ou=operators taken for an account")
	}
}

// The changefeed's frames: the v1 and v2 bootstraps and a change item as
// VMAPI's publishChange (sdc-vmapi lib/common/util.js) builds it, with
// the KVM sample as its resourceObject (sdc-apis.md §2.2, §2.3).
func TestWireChangefeedFrames(t *testing.T) {
	boot := `{"resource": "vm", "subResources": ["alias","customer_metadata","destroyed","internal_metadata","nics",
 "owner_uuid","server_uuid","state","tags"], "bootstrapRoute": "/vms"}`
	for _, f := range []string{boot, `{"bootstrapRoutes": [` + boot + `]}`} {
		if ev, ours, err := decodeFrame([]byte(f), "vm"); err != nil || !ours || !ev.Bootstrap {
			t.Errorf("bootstrap %.40s: %+v %v %v", f, ev, ours, err)
		}
	}
	item := `{"changeKind": {"resource": "vm", "subResources": ["state", "zone_state", "last_modified"]},
 "changedResourceId": "03750e6a-fcf6-4755-85b5-22b8ddf0f1fb",
 "resourceObject": ` + wireFile(t, "vmapi-vm-kvm.json") + `,
 "published": "1600345678901"}`
	ev, ours, err := decodeFrame([]byte(item), "vm")
	if err != nil || !ours || ev.Change == nil {
		t.Fatalf("change item: %+v %v %v", ev, ours, err)
	}
	ch := ev.Change
	if ch.UUID != "03750e6a-fcf6-4755-85b5-22b8ddf0f1fb" || !slices.Equal(ch.SubResources, []string{"state", "zone_state", "last_modified"}) ||
		ch.Object == nil || ch.Object.ServerUUID != "564d47c4-b845-113b-664f-2a1d85d0020c" || ch.Object.LastModified != "2012-12-21T06:55:32.000Z" {
		t.Errorf("change item: %+v, object %+v", ch, ch.Object)
	}
	if _, ours, _ := decodeFrame([]byte(`{"changeKind": {"resource": "server", "subResources": ["x"]}, "changedResourceId": "u"}`), "vm"); ours {
		t.Error("an item about another resource taken for ours")
	}
}
