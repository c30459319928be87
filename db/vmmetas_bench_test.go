package db

import (
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkVMMetas reads the metas of a share of a store's CNS_BENCH_VMS
// VMs (in UUID order, as the services view asks) by a lookup each and by
// one pass over every entry: VMMetas scans from a sixteenth of the VMs
// upwards. Compare the two at each share.
func BenchmarkVMMetas(b *testing.B) {
	n := benchVMs(b)
	d := benchStore(b, n)
	for _, share := range []int{1, 3, 10, 80} {
		var uuids []string
		for i := range n * share / 100 {
			uuids = append(uuids, benchVM(i*100/share, 0).UUID)
		}
		// benchVM's UUIDs sort as their numbers: uuids are in order.
		for _, how := range []struct {
			name string
			read func(*bolt.Tx, []string, func(string, []byte) error) error
		}{{"lookup", lookUpVMMetas}, {"scan", scanVMMetas}} {
			b.Run(fmt.Sprintf("vms=%d/share=%d%%/%s", n, share, how.name), func(b *testing.B) {
				for b.Loop() {
					seen := 0
					err := d.view(func(tx *bolt.Tx) error {
						return how.read(tx, uuids, func(string, []byte) error { seen++; return nil })
					})
					if err != nil || seen != len(uuids) {
						b.Fatalf("%d of %d VMs read: %v", seen, len(uuids), err)
					}
				}
			})
		}
	}
}
