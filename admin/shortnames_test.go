package admin

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

// With client_answers, a VM's view lists the addresses it asks from and
// the owner-less short names of its names; without, neither (cnsadm's
// TestWriteVMShortNames prints them).
func TestVMShortNames(t *testing.T) {
	const uuid = "a1000000-0000-4000-8000-000000000001"
	rr := func(s string) dns.RR {
		x, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	vm := db.VM{UUID: uuid, Records: []db.VMRecord{
		{Zone: "z.example", Owner: uuid + ".inst.alice.z.example.", RRs: []dns.RR{rr(uuid + `.inst.alice.z.example. 30 IN TXT "` + uuid + `"`)}},
		{Zone: "z.example", Owner: "db-1.inst.alice.z.example.", RRs: []dns.RR{rr(`db-1.inst.alice.z.example. 30 IN TXT "` + uuid + `"`)}},
		{Zone: "z.example", Owner: "web.svc.alice.z.example.", RRs: []dns.RR{rr(`web.svc.alice.z.example. 30 IN TXT "` + uuid + `"`)}},
	}}
	if got := VMJSON(vm, nil); got.ClientAddrs != nil || got.ShortNames != nil {
		t.Errorf("without a client: %v %v", got.ClientAddrs, got.ShortNames)
	}
	vm.Client = &db.Client{Owner: "alice", Addrs: []db.ClientAddr{{Addr: netip.MustParseAddr("10.0.0.5")},
		{Addr: netip.MustParseAddr("192.168.128.5"), Fabric: netip.MustParsePrefix("192.168.128.0/22")}}}
	got := VMJSON(vm, nil)
	wantAddrs := []string{"10.0.0.5", "192.168.128.5 (fabric 192.168.128.0/22)"}
	wantNames := []string{uuid + ".inst.z.example", "db-1.inst.z.example", "self.inst.z.example", "web.svc.z.example"}
	if !slices.Equal(got.ClientAddrs, wantAddrs) || !slices.Equal(got.ShortNames, wantNames) {
		t.Errorf("client addrs %q short names %q, want %q %q", got.ClientAddrs, got.ShortNames, wantAddrs, wantNames)
	}
}
