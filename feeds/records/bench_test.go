package records

import (
	"os"
	"strconv"
	"testing"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// benchVMs is the size of the generated data center the benchmarks walk
// (CNS_BENCH_VMS, default 10000): record generation is per VM, so the
// figure scales linearly and 10k VMs keep `go test -bench` quick.
func benchVMs(b *testing.B) int {
	if s := os.Getenv("CNS_BENCH_VMS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("CNS_BENCH_VMS=%q: want a number of VMs", s)
		}
		return n
	}
	return 10_000
}

// BenchmarkCompute measures record generation per VM: records.Compute over
// a synthetic data center (sdcsim.Generate: ~50 VMs per owner, services of
// 3-30 members, half the VMs with an alias, one in ten with IPv6), one zone
// taking every network, the reverse zones as bench/run.sh configures them.
// It reports VMs/s and the projected time for 100k VMs (target < 5 s).
func BenchmarkCompute(b *testing.B) {
	n := benchVMs(b)
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: n, Seed: 20240611})
	w := &World{Networks: map[string]*dc.Network{}, Pools: map[string][]string{}, PoolNetworks: map[string][]string{}}
	for i := range inv.Networks {
		w.Networks[inv.Networks[i].UUID] = &inv.Networks[i]
	}
	for _, p := range inv.NetworkPools {
		w.PoolNetworks[p.UUID] = p.Networks
		for _, nw := range p.Networks {
			w.Pools[nw] = append(w.Pools[nw], p.UUID)
		}
	}
	owners := map[string]*dc.User{}
	for i := range inv.Users {
		owners[inv.Users[i].UUID] = &inv.Users[i]
	}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"uuid_alias", Config{UseAlias: true, Zones: []Zone{{Name: "dc.cns.example", Networks: []string{"*"}}}, ReverseV4Prefix: 8}},
		{"uuid_alias_login", Config{UseAlias: true, UseLogin: true, Zones: []Zone{{Name: "dc.cns.example", Networks: []string{"*"}}}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			records := 0
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				vm := &inv.VMs[i%n]
				res := Compute(&tc.cfg, w, Input{VM: vm, Owner: owners[vm.OwnerUUID]})
				if len(res.Records) == 0 {
					b.Fatalf("VM %s: no records (%q)", vm.UUID, res.Problems)
				}
				records += len(res.Records)
				i++
			}
			perVM := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(1/perVM, "VMs/s")
			b.ReportMetric(perVM*100_000, "s/100kVMs")
			b.ReportMetric(float64(records)/float64(b.N), "records/VM")
		})
	}
}
