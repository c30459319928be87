package db

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// entryKeys returns the stored VM entries' keys as "<seq> <uuid>", in
// the bucket's order, and fails when a hash entry does not locate its
// VM's entry.
func entryKeys(t *testing.T, d *DB) []string {
	t.Helper()
	var out []string
	err := d.view(func(tx *bolt.Tx) error {
		hb := tx.Bucket(bucketVMHashes)
		return tx.Bucket(bucketVMs).ForEach(func(k, _ []byte) error {
			if len(k) != vmKeyLen {
				return fmt.Errorf("vm key %x is not a sequence and a UUID", k)
			}
			id, _ := vmKeyID(k)
			uuid := []byte(formatUUID(id))
			if v := hb.Get(uuid); !bytes.Equal(vmEntryKey(uuid, id, v), k) {
				return fmt.Errorf("vm %s: hash entry %x does not locate key %x", uuid, v, k)
			}
			out = append(out, fmt.Sprintf("%d %s", beU64(k), uuid))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Ensure VM entries are keyed by when the VM was first stored: a
// commit's new VMs come after every stored one, a VM that changes keeps
// its key, a removed one loses it and its hash entry, one stored again
// comes last; and that what the store shows of each is right throughout.
func TestVMEntriesKeyedByFirstStored(t *testing.T) {
	d, _ := openTest(t, Options{})
	mustCommit(t, d, &ChangeSet{Zones: testConfig()})
	a := func(uuid, name, ip string) VMChange {
		return VMChange{UUID: uuid, Meta: []byte(name), Hash: 7,
			Records: []Record{rec(t, "dc.example.com", name+".dc.example.com. 30 IN A "+ip)}}
	}
	steps := []struct {
		what string
		vms  []VMChange
		want []string
	}{
		{"first commit: in UUID order", []VMChange{a(vm3, "c", "10.0.0.3"), a(vm1, "a", "10.0.0.1")},
			[]string{"1 " + vm1, "1 " + vm3}},
		{"a new VM sorting first comes after them", []VMChange{a(vm2, "b", "10.0.0.2")},
			[]string{"1 " + vm1, "1 " + vm3, "2 " + vm2}},
		{"a changed VM keeps its key", []VMChange{a(vm1, "a2", "10.0.0.9")},
			[]string{"1 " + vm1, "1 " + vm3, "2 " + vm2}},
		{"a removed VM loses it", []VMChange{{UUID: vm1, Delete: true}},
			[]string{"1 " + vm3, "2 " + vm2}},
		{"stored again, it comes last", []VMChange{a(vm1, "a3", "10.0.0.1")},
			[]string{"1 " + vm3, "2 " + vm2, "3 " + vm1}},
	}
	for _, s := range steps {
		mustCommit(t, d, &ChangeSet{VMs: s.vms})
		if got := entryKeys(t, d); !slices.Equal(got, s.want) {
			t.Fatalf("%s: keys %q, want %q", s.what, got, s.want)
		}
	}
	for uuid, name := range map[string]string{vm1: "a3", vm2: "b", vm3: "c"} {
		vm, ok, err := d.VM(uuid)
		if err != nil || !ok || string(vm.Meta) != name || len(vm.Records) != 1 {
			t.Errorf("vm %s: %+v ok=%v err=%v, want meta %q and its record", uuid, vm, ok, err, name)
		}
	}
	if got := published(t, d, "dc.example.com", "a2.dc.example.com."); got != nil {
		t.Errorf("the removed VM's old name still answers %q", got)
	}
	hashes, err := d.VMHashes()
	if err != nil || len(hashes) != 3 || hashes[vm1] != 7 {
		t.Errorf("VMHashes %v %v, want the 3 VMs with digest 7", hashes, err)
	}
	if p, err := d.Check(); err != nil || len(p) != 0 {
		t.Errorf("check: %v %v", err, p)
	}

	// A hash entry that points elsewhere is what Check reports.
	err = d.file.Load().Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketVMHashes).Put([]byte(vm2), vmHashValue(7, 9))
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"hash of vm " + vm2 + ", which is not stored where it says", "vm " + vm2 + " has no hash entry that locates it"}
	if p, err := d.Check(); err != nil || !slices.Equal(p, want) {
		t.Errorf("check of a hash entry pointing elsewhere: %q %v, want %q", p, err, want)
	}
}
