// Command geninv writes a synthetic data center inventory (the inventory
// file format) of N VMs to stdout, for benchmarks and load tests.
//
//	go run ./bench/geninv -n 100000 > /tmp/inv100k.json
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

func main() {
	n := flag.Int("n", 10000, "number of VMs")
	seed := flag.Uint64("seed", 20240611, "random seed: same seed, same data center")
	flag.Parse()
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: *n, Seed: *seed})
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(inv); err != nil {
		fmt.Fprintln(os.Stderr, "geninv:", err)
		os.Exit(1)
	}
}
