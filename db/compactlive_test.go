package db

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// contents is every key and value of the file, by bucket path, hashed.
func contents(t *testing.T, d *DB) map[string][32]byte {
	t.Helper()
	out, err := contentsErr(d)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func contentsErr(d *DB) (map[string][32]byte, error) {
	out := map[string][32]byte{}
	var walk func(path string, b *bolt.Bucket) error
	walk = func(path string, b *bolt.Bucket) error {
		out[path+"/"] = sha256.Sum256(binary.BigEndian.AppendUint64(nil, b.Sequence()))
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(path+"/"+string(k), b.Bucket(k))
			}
			out[path+"/"+string(k)] = sha256.Sum256(v)
			return nil
		})
	}
	err := d.view(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name), b) })
	})
	return out, err
}

// CompactLive swaps a sparse file for its compacted copy under a running
// store: the copy holds exactly what the file held and is smaller, a
// read that began in the old file finishes there across the swap (and
// the swap waits for it), reads meanwhile never fail, commits go on in
// the new file, and path stays locked against a second process.
func TestCompactLive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cns.db")
	d, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// A sparse file: every VM rewritten three times, as a first load's
	// chunks rewrite the name pages.
	const vms = 3000
	for v := range 3 {
		cs := &ChangeSet{Zones: benchZoneConfig()}
		for i := range vms {
			cs.VMs = append(cs.VMs, benchVM(i, v))
		}
		mustCommit(t, d, cs)
	}
	before := contents(t, d)
	old := d.file.Load()

	// A read in the old file that lasts until the new one is in place.
	inTx, held := make(chan struct{}), make(chan error, 1)
	go func() {
		held <- d.view(func(tx *bolt.Tx) error {
			close(inTx)
			for d.file.Load() == old {
				runtime.Gosched()
			}
			if n := tx.Bucket(bucketVMs).Stats().KeyN; n != vms {
				return errors.New("the old file's VMs are not readable across the swap")
			}
			return nil
		})
	}()
	<-inTx
	// Reads that keep starting while the file is copied and swapped.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr error
	var mu sync.Mutex
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := d.Zones(); err != nil {
					mu.Lock()
					readErr = err
					mu.Unlock()
					return
				}
			}
		})
	}
	res, err := d.CompactLive()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if readErr != nil {
		t.Fatalf("a read during the compaction failed: %v", readErr)
	}
	if res.After >= res.Before {
		t.Fatalf("compacted file %d bytes, was %d", res.After, res.Before)
	}
	t.Logf("%d → %d bytes", res.Before, res.After)
	after := contents(t, d)
	if len(after) != len(before) {
		t.Fatalf("%d keys after, %d before", len(after), len(before))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("key %q differs after the compaction", k)
		}
	}
	if _, ok, err := d.CompactIfSparse(); err != nil || ok {
		t.Fatalf("a compacted file compacted again (%v, %v)", ok, err)
	}

	// Commits go on, into the new file, and a second process is kept out.
	cs := &ChangeSet{}
	for i := range 10 {
		cs.VMs = append(cs.VMs, benchVM(i, 7))
	}
	mustCommit(t, d, cs)
	if _, err := Open(path, Options{ReadOnly: true}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second open of the compacted file: %v, want ErrLocked", err)
	}
	want := contents(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".cns.db.compact.*")); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	d, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	got := contents(t, d)
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("key %q differs after reopening", k)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("compacted file mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}

// A compaction's copy in many transactions holds what the file held:
// every bucket with its sequence, every key and value.
func TestCopyLiveInSmallTransactions(t *testing.T) {
	d, _ := openTest(t, Options{NoSync: true})
	cs := &ChangeSet{Zones: benchZoneConfig()}
	for i := range 500 {
		cs.VMs = append(cs.VMs, benchVM(i, 0))
	}
	mustCommit(t, d, cs)
	if err := d.file.Load().Update(func(tx *bolt.Tx) error {
		zones := tx.Bucket(bucketZones)
		zone, _ := zones.Cursor().First()
		if err := zones.Bucket(zone).SetSequence(9); err != nil { // nested
			return err
		}
		return tx.Bucket(bucketVMs).SetSequence(77)
	}); err != nil {
		t.Fatal(err)
	}
	dst, err := bolt.Open(filepath.Join(t.TempDir(), "copy.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if err := copyLive(dst, d.file.Load(), 4096); err != nil {
		t.Fatal(err)
	}
	copied := &DB{opts: Options{ReadOnly: true}}
	copied.file.Store(dst)
	want, got := contents(t, d), contents(t, copied)
	if len(got) != len(want) {
		t.Fatalf("%d entries copied, %d in the file", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%q differs in the copy", k)
		}
	}
	var commits int
	if err := dst.View(func(tx *bolt.Tx) error { commits = tx.ID(); return nil }); err != nil {
		t.Fatal(err)
	}
	if commits < 10 {
		t.Fatalf("copied in %d transactions, want many of 4096 bytes", commits)
	}
}
