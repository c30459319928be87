package db

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A VM's last-seen time is saved apart from commits, read with the VM,
// not saved for a VM the store does not hold, and goes with the VM.
func TestLastSeen(t *testing.T) {
	d, _ := openTest(t, Options{})
	const z = "dc.example.com"
	mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: []VMChange{
		{UUID: vm1, Records: []Record{rec(t, z, "a.dc.example.com. 30 IN A 10.0.0.1")}},
	}})
	if vm, _, _ := d.VM(vm1); !vm.LastSeen.IsZero() {
		t.Errorf("never saved: %v", vm.LastSeen)
	}
	at := time.UnixMilli(1_800_000_123_456)
	if err := d.SaveLastSeen(map[string]int64{vm1: at.UnixMilli(), vm3: at.UnixMilli(), "not-a-uuid": 1}); err != nil {
		t.Fatal(err)
	}
	if vm, _, _ := d.VM(vm1); !vm.LastSeen.Equal(at) {
		t.Errorf("saved %v, read %v", at, vm.LastSeen)
	}
	entries := func() int {
		n := 0
		d.view(func(tx *bolt.Tx) error {
			if b := tx.Bucket(bucketLastSeen); b != nil {
				n = b.Stats().KeyN
			}
			return nil
		})
		return n
	}
	if n := entries(); n != 1 {
		t.Errorf("%d entries: a VM the store does not hold was saved", n)
	}
	mustCommit(t, d, &ChangeSet{VMs: []VMChange{{UUID: vm1, Delete: true}}})
	if n := entries(); n != 0 {
		t.Errorf("%d entries after the VM's removal", n)
	}
}
