package db

import (
	"path/filepath"
	"testing"
)

// A commit that moves every name of a bucket spanning many pages (all
// VMs renumbered: every PTR of the reverse zone deleted, new ones put
// after them) completes. bbolt's Cursor.Last never returned on such a
// bucket once all its keys were deleted in the transaction, so the
// commit's first put hung the updater for good.
func TestCommitMovesEveryName(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "cns.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const vms = 2000
	for v := range 2 {
		cs := &ChangeSet{Zones: benchZoneConfig()}
		for i := range vms {
			cs.VMs = append(cs.VMs, benchVM(i, v)) // v moves every address
		}
		mustCommit(t, d, cs)
	}
	zi, ok, err := d.Zone("10.in-addr.arpa")
	if err != nil || !ok {
		t.Fatalf("reverse zone: %v %v", ok, err)
	}
	if zi.Names < vms {
		t.Fatalf("reverse zone holds %d names after the move, want %d", zi.Names, vms)
	}
}
