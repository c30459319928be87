package sdcsim

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// GenerateOptions shape a synthetic data center.
type GenerateOptions struct {
	VMs  int    // number of VMs
	Seed uint64 // same seed, same data center
	// VMsPerOwner averages the VMs per account (default 50).
	VMsPerOwner int
	// VMsPerCN averages the VMs per compute node (default 100).
	VMsPerCN int
	// Networks adds that many fabric networks, each owned by one account;
	// every other VM gets a second NIC on one of the first quarter of its
	// owner's (so at most a quarter are named by a VM, as in a data center
	// where many fabric networks are empty).
	Networks int
}

// Generation constants: the shape the benchmarks and load tests use.
const (
	ExternalNetwork = "c66bd90b-6e21-4a55-a4b5-18f6010c6b14"
	ExternalPool    = "3b5913ec-42e6-4803-9c0b-c9b1c5603520"
	AdminNetwork    = "7c1f0f5c-2b5e-4f5d-9a2f-0a0d0e0f0a01"
)

var words = []string{"web", "api", "db", "cache", "worker", "lb", "queue", "search", "auth", "mail", "log",
	"metrics", "build", "ci", "proxy", "app", "front", "back", "store", "media", "stream", "batch", "cron",
	"gw", "redis", "pg", "mysql", "mongo", "kafka", "zk", "consul", "vault", "nginx"}

var ports = []int{80, 443, 8080, 8443, 5432, 3306, 6379, 9092, 2181, 27017}

// Generate returns a realistic data center of o.VMs running VMs: ~50 per
// owner (all opted in), services of 3–30 members from one owner's VMs,
// half the VMs with an alias, addresses packed densely from 10.0.0.0/8 as
// NAPI allocates them, and one VM in ten with an IPv6 address too.
func Generate(o GenerateOptions) *dc.Inventory {
	if o.VMsPerOwner <= 0 {
		o.VMsPerOwner = 50
	}
	if o.VMsPerCN <= 0 {
		o.VMsPerCN = 100
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x636e73))
	uuid := func() string {
		a, b := rng.Uint64(), rng.Uint64()
		a = a&^(0xF<<12) | 0x4<<12
		b = b&^(0x3<<62) | 0x2<<62
		h := fmt.Sprintf("%016x%016x", a, b)
		return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	}
	inv := &dc.Inventory{
		Networks: []dc.Network{
			{UUID: ExternalNetwork, Name: "external", Family: "ipv4", Subnet: "10.0.0.0/8", NICTag: "external", VLANID: genPtr(0)},
			{UUID: AdminNetwork, Name: "admin", Family: "ipv4", Subnet: "172.16.0.0/16", NICTag: "admin", VLANID: genPtr(0)},
		},
		NetworkPools: []dc.NetworkPool{{UUID: ExternalPool, Name: "external-pool", Family: "ipv4", Networks: []string{ExternalNetwork}, NICTag: "external"}},
	}
	nOwners := max(1, o.VMs/o.VMsPerOwner)
	for i := range nOwners {
		inv.Users = append(inv.Users, dc.User{UUID: uuid(), Login: fmt.Sprintf("user%d", i), TritonCNSEnabled: "true", ApprovedForProvisioning: "true"})
	}
	nCNs := max(1, o.VMs/o.VMsPerCN)
	hb := "2026-01-01T00:00:00.000Z"
	for i := range nCNs {
		inv.Servers = append(inv.Servers, dc.Server{UUID: uuid(), Hostname: fmt.Sprintf("cn%d", i), Setup: true,
			Status: "running", LastHeartbeat: &hb, LastBoot: "2025-12-01T00:00:00.000Z",
			Sysinfo: map[string]any{"Admin NIC Tag": "admin"}})
	}
	fabrics := make([][]string, nOwners) // each owner's fabric networks
	for i := range o.Networks {
		owner := i % nOwners
		id := uuid()
		inv.Networks = append(inv.Networks, dc.Network{UUID: id, Name: fmt.Sprintf("fabric%d", i), Family: "ipv4",
			Subnet: fmt.Sprintf("192.168.%d.0/24", i%256), NICTag: "sdc_overlay", VLANID: genPtr(2 + i%4000),
			OwnerUUIDs: []string{inv.Users[owner].UUID}, Fabric: true})
		fabrics[owner] = append(fabrics[owner], id)
	}
	ownerVMs := make([][]int, nOwners)
	for i := range o.VMs {
		owner := rng.IntN(nOwners)
		ownerVMs[owner] = append(ownerVMs[owner], i)
		ip := fmt.Sprintf("10.%d.%d.%d", (i+256)>>16&255, (i+256)>>8&255, (i+256)&255)
		nic := dc.NIC{Interface: "net0", MAC: mac(i), VLANID: genPtr(0), NICTag: "external", IP: ip,
			IPs: []string{ip + "/8"}, Netmask: "255.0.0.0", NetworkUUID: ExternalNetwork, Primary: true}
		if i%10 == 0 {
			nic.IPs = append(nic.IPs, fmt.Sprintf("2001:db8:%x::%x/64", i>>16, i&0xffff))
		}
		vm := dc.VM{UUID: uuid(), OwnerUUID: inv.Users[owner].UUID, ServerUUID: inv.Servers[i%nCNs].UUID,
			State: "running", Brand: "joyent", NICs: []dc.NIC{nic}, Tags: map[string]any{}, CustomerMetadata: map[string]any{}}
		if i%2 == 0 {
			vm.Alias = genPtr(fmt.Sprintf("%s-%d", words[rng.IntN(len(words))], i))
		}
		if nets := fabrics[owner]; len(nets) > 0 && i%2 == 1 {
			n := nets[rng.IntN(max(1, len(nets)/4))]
			vm.NICs = append(vm.NICs, dc.NIC{Interface: "net1", MAC: mac(i | 1<<23), VLANID: genPtr(0),
				NICTag: "sdc_overlay/" + strconv.Itoa(i%16777216), IP: fmt.Sprintf("192.168.%d.%d", i%256, 2+i%250),
				Netmask: "255.255.255.0", NetworkUUID: n})
		}
		inv.VMs = append(inv.VMs, vm)
	}
	// Services: one per 20 VMs, members from one owner.
	svcTags := make([][]string, o.VMs)
	for s := range max(1, o.VMs/20) {
		owner := rng.IntN(nOwners)
		for len(ownerVMs[owner]) == 0 {
			owner = rng.IntN(nOwners)
		}
		name := fmt.Sprintf("%s%d", words[rng.IntN(len(words))], s)
		tag := name
		if rng.IntN(10) < 3 {
			tag = fmt.Sprintf("%s:%d", name, ports[rng.IntN(len(ports))])
		}
		members := 3 + rng.IntN(28)
		for _, j := range rng.Perm(len(ownerVMs[owner]))[:min(members, len(ownerVMs[owner]))] {
			vm := ownerVMs[owner][j]
			svcTags[vm] = append(svcTags[vm], tag)
		}
	}
	for i, tags := range svcTags {
		if len(tags) > 0 {
			inv.VMs[i].Tags["triton.cns.services"] = strings.Join(tags, ",")
		}
	}
	return inv
}

func mac(i int) string {
	return fmt.Sprintf("90:b8:d0:%02x:%02x:%02x", i>>16&255, i>>8&255, i&255)
}

func genPtr[T any](v T) *T { return &v }
