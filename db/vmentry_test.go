package db

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

var fuzzVM = [16]byte{0x00, 0x05, 0x8e, 0x63, 0x08, 0x2d, 0x49, 0xe4, 0xa9, 0xfd, 0xcd, 0x5c, 0xb2, 0x6d, 0xa7, 0xab}

// encodeVMEntryV2 is the encoder of schema 1, as it was, to write the
// entries the upgrade reads.
func encodeVMEntryV2(v *vmEntry) []byte {
	e := &enc{}
	e.U8(vmEntryV2)
	e.Bytes32(v.meta)
	names := slices.Clone(v.names)
	slices.SortStableFunc(names, func(a, b vmName) int { return strings.Compare(a.zone, b.zone) })
	var groups int
	for i := range names {
		if i == 0 || names[i].zone != names[i-1].zone {
			groups++
		}
	}
	e.U16(uint16(groups))
	for i := 0; i < len(names); {
		j := i
		for j < len(names) && names[j].zone == names[i].zone {
			j++
		}
		e.Str16(names[i].zone)
		e.U32(uint32(j - i))
		for _, n := range names[i:j] {
			e.Bytes16(n.key)
		}
		i = j
	}
	return e.B
}

// allLabels reports whether every key of e is a sequence of DNS labels.
func allLabels(e vmEntry) bool {
	for _, n := range e.names {
		for i := 0; i < len(n.key); i += int(n.key[i]) + 1 {
			if n.key[i] >= 64 || i+int(n.key[i]) >= len(n.key) {
				return false
			}
		}
	}
	return true
}

// Ensure a VM entry reads back as written, that an entry of schema 1
// still reads, and that the UUIDs a VM's names repeat are stored once: a
// typical VM (from a 100k-VM load) takes under half the bytes.
func TestVMEntryEncoding(t *testing.T) {
	owner := []byte("$3590efb5-2bb9-4367-9deb-c7c95a154295")
	own := append([]byte{36}, formatUUID(fuzzVM)...)
	label := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	e := vmEntry{meta: bytes.Repeat([]byte("m"), 80), names: []vmName{
		{zone: "dc.cns.example", key: cat(label("cmon"), own)},
		{zone: "10.in-addr.arpa", key: cat(label("0"), label("206"), label("45"))},
		{zone: "dc.cns.example", key: cat(owner, label("inst"), own)},
		{zone: "dc.cns.example", key: cat(owner, label("inst"), label("web-7"))},
		{zone: "dc.cns.example", key: cat(owner, label("svc"), label("web"))},
		{zone: "dc.cns.example", key: cat(label("web"), label("svc"), owner)},
		{zone: "dc.cns.example", key: []byte{}},
	}}
	v3, v2 := e.encode(fuzzVM), encodeVMEntryV2(&e)
	for _, b := range [][]byte{v3, v2} {
		got, err := decodeVMEntry(fuzzVM, b)
		if err != nil {
			t.Fatalf("%x: %v", b, err)
		}
		if !bytes.Equal(got.meta, e.meta) || !slices.Equal(vmNameSet(got), vmNameSet(e)) {
			t.Errorf("version %d: read back\n%q\nwant\n%q", b[0], vmNameSet(got), vmNameSet(e))
		}
	}
	if names3, names2 := len(v3)-len(e.meta), len(v2)-len(e.meta); names3*2 > names2 {
		t.Errorf("names take %d bytes in version 3, %d in version 2: want under half", names3, names2)
	}
	// Another VM's id reads other names: the entry is bound to its key.
	other := fuzzVM
	other[0] ^= 1
	if got, err := decodeVMEntry(other, v3); err == nil && slices.Equal(vmNameSet(got), vmNameSet(e)) {
		t.Error("entry read under another VM's id gives the same names")
	}
	for _, bad := range [][]byte{{vmEntryV3}, {vmEntryV3, 0, 1, 1, 'a', 1, 1, labelRef | 9}, {vmEntryV3, 0, 1, 1, 'a', 1, 1, 70}, {9}} {
		if _, err := decodeVMEntry(fuzzVM, bad); err == nil {
			t.Errorf("%x decoded", bad)
		}
	}
}

// openFixture copies the gzipped db in testdata to a fresh file.
func openFixture(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cns.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// storeView is everything the readers of a store see.
type storeView struct {
	Zones    []ZoneInfo
	Records  map[string][]string
	Journals map[string][]JournalEntry
	VMs      map[string]VM
}

func viewOf(t *testing.T, d *DB) storeView {
	t.Helper()
	v := storeView{Records: map[string][]string{}, Journals: map[string][]JournalEntry{}, VMs: map[string]VM{}}
	zones, err := d.Zones()
	if err != nil {
		t.Fatal(err)
	}
	v.Zones = zones
	for _, z := range zones {
		err := d.ScanZone(z.Name, func(owner []byte, rrs RRs) error {
			v.Records[z.Name] = append(v.Records[z.Name], WireToString(owner)+" "+string(rrs))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if v.Journals[z.Name], err = d.History(z.Name, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	err = d.EachVM(func(uuid string, _ []byte) error {
		vm, ok, err := d.VM(uuid)
		if !ok || err != nil {
			t.Fatalf("vm %s listed but not read: %v", uuid, err)
		}
		v.VMs[uuid] = vm
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Ensure a file of an older schema reads as it is when opened read-only,
// is upgraded in place by a writable open, and afterwards shows its
// readers exactly what it showed before: zones, records, journals, every
// VM's meta and records. The upgrade is cut short once and resumes. The
// fixtures: cns at 930173c (schema 1: entries of version 2, no vmhash
// bucket) and at 294adbb (schema 2: entries keyed by the UUID's text)
// loaded testdata/inventory.json, then the same less one VM, and
// compacted the file.
func TestUpgrade(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		vms     int  // the VMs (and compute nodes) it holds
		version byte // its entries' encoding
	}{
		{"schema1.db.gz", 27, vmEntryV2},
		{"schema2.db.gz", 27, vmEntryV3},
	} {
		t.Run(tc.fixture, func(t *testing.T) { testUpgrade(t, tc.fixture, tc.vms, tc.version) })
	}
}

func testUpgrade(t *testing.T, fixture string, vms int, version byte) {
	path := openFixture(t, fixture)
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	before := viewOf(t, ro)
	ro.Close()
	if len(before.VMs) != vms || len(before.Zones) != 5 || len(before.Journals["us-west-1.cns.example.com"]) != 1 {
		t.Fatalf("fixture holds %d VMs, %d zones: not the one described", len(before.VMs), len(before.Zones))
	}
	// layout counts the entries by encoding, the entries keyed by
	// sequence and UUID, and the hash entries that locate one (vmkey.go).
	layout := func() (versions map[byte]int, keyed, locating int) {
		versions = map[byte]int{}
		b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		b.View(func(tx *bolt.Tx) error {
			tx.Bucket(bucketVMs).ForEach(func(k, v []byte) error {
				versions[v[0]]++
				if len(k) == vmKeyLen {
					keyed++
				}
				return nil
			})
			if hb := tx.Bucket(bucketVMHashes); hb != nil {
				hb.ForEach(func(_, v []byte) error {
					if len(v) == vmHashValueLen {
						locating++
					}
					return nil
				})
			}
			return nil
		})
		return versions, keyed, locating
	}
	if v, keyed, locating := layout(); v[version] != vms || keyed != 0 || locating != 0 {
		t.Fatalf("fixture entries by version %v, %d keyed by sequence, %d hash entries locating one", v, keyed, locating)
	}

	// An upgrade cut short after its first chunk: the schema is the
	// current one already, so an older cns refuses the file, and the next
	// open finishes.
	d, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = d.file.Load().Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		meta.Put(keyUpgrading, u32bytes(1))
		// One entry back to the fixture's encoding and the older
		// layout: keyed by its UUID's text, a hash entry of the digest
		// alone.
		vms := tx.Bucket(bucketVMs)
		k, v := vms.Cursor().First()
		id, err := vmKeyID(k)
		if err != nil {
			return err
		}
		old := bytes.Clone(v)
		if version == vmEntryV2 {
			e, _ := decodeVMEntry(id, v)
			old = encodeVMEntryV2(&e)
		}
		if err := vms.Delete(bytes.Clone(k)); err != nil {
			return err
		}
		uuid := []byte(formatUUID(id))
		hashes := tx.Bucket(bucketVMHashes)
		if err := hashes.Put(uuid, bytes.Clone(hashes.Get(uuid)[:8])); err != nil {
			return err
		}
		return vms.Put(uuid, old)
	})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if v, keyed, _ := layout(); v[version] == 0 || keyed != vms-1 {
		t.Fatalf("entries by version after the first open: %v, %d keyed by sequence (want all but 1)", v, keyed)
	}
	var upgraded int
	d, err = Open(path, Options{UpgradeVMMeta: func(m []byte) []byte { upgraded++; return append([]byte("new "), m...) }})
	if err != nil {
		t.Fatal(err)
	}
	after := viewOf(t, d)
	if p, err := d.Check(); err != nil || len(p) != 0 {
		t.Errorf("upgraded file fails the check: %v %v", err, p)
	}
	var unfinished bool
	d.file.Load().View(func(tx *bolt.Tx) error {
		unfinished = tx.Bucket(bucketMeta).Get(keyUpgrading) != nil
		if v := tx.Bucket(bucketMeta).Get(keySchema); beU32(v) != SchemaVersion {
			t.Errorf("schema %d after the upgrade", beU32(v))
		}
		return nil
	})
	d.Close()
	// Metas pass through UpgradeVMMeta with their entry's encoding.
	if want := map[byte]int{vmEntryV2: 1, vmEntryV3: 0}[version]; unfinished || upgraded != want {
		t.Errorf("upgrade unfinished %v, %d metas rewritten on resuming (want %d)", unfinished, upgraded, want)
	}
	if v, keyed, locating := layout(); v[vmEntryV3] != vms || keyed != vms || locating != vms {
		t.Errorf("after the upgrade: entries by version %v, %d keyed by sequence, %d hash entries locating one; want %d each", v, keyed, locating, vms)
	}
	for uuid, vm := range after.VMs {
		if m := before.VMs[uuid].Meta; bytes.HasPrefix(vm.Meta, []byte("new ")) {
			vm.Meta = vm.Meta[4:]
			after.VMs[uuid] = vm
		} else if !bytes.Equal(vm.Meta, m) {
			t.Errorf("vm %s meta changed", uuid)
		}
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("the upgrade changed what the store shows:\nbefore %+v\nafter  %+v", before, after)
	}
}
