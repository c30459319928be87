package db

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tritondatacenter/cns/db/durable"
)

// The store's life that TestPowerCut cuts the power under. It runs in a
// process of its own (TestMain, with powerLifeEnv naming the directory),
// as cns serve does: a process must not map a file of a FUSE mount it
// serves itself (a page fault of bbolt's map waits for the file system,
// whose goroutines wait for a garbage collection that waits for the
// fault).

// powerLifeEnv names the directory the life runs in.
const powerLifeEnv = "CNS_TEST_POWER_LIFE"

func TestMain(m *testing.M) {
	if dir := os.Getenv(powerLifeEnv); dir != "" {
		err := powerLife(dir, func(step, digest string) {
			fi, err := os.Stat(filepath.Join(dir, "cns.db"))
			if err != nil {
				panic(err)
			}
			fmt.Printf("%s\t%d\t%s\n", digest, fi.Size(), step)
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// powerLife is the store's life in dir: a first load, commits, a backup,
// a live compaction, an offline one, a restore of the backup and a
// commit on the restored file, as cns serve, cns db backup, cns db
// compact and cns db restore do them. done is called after each step
// that returned, with the digest of what the file holds then; a step
// that fails (the power went) ends the life.
func powerLife(dir string, done func(step, digest string)) error {
	path := filepath.Join(dir, "cns.db")
	backup := filepath.Join(dir, "backup.db")
	st, err := Open(path, Options{})
	if err != nil {
		return err
	}
	defer func() {
		if st != nil {
			st.Close()
		}
	}()
	snapshot := func(step string) error {
		digest, err := contentsDigest(st)
		if err == nil {
			done(step, digest)
		}
		return err
	}
	commit := func(step string, cs *ChangeSet) error {
		if _, err := st.Commit(cs); err != nil {
			return fmt.Errorf("%s: %w", step, err)
		}
		return snapshot(step)
	}
	const vms = 200
	load := &ChangeSet{Zones: benchZoneConfig()}
	for i := range vms {
		load.VMs = append(load.VMs, benchVM(i, 0))
	}
	if err := commit("first load", load); err != nil {
		return err
	}
	moves := func(v, n int) *ChangeSet {
		cs := &ChangeSet{}
		for i := range n {
			cs.VMs = append(cs.VMs, benchVM((i*7+v)%vms, v))
		}
		return cs
	}
	if err := commit("commit 1", moves(1, 30)); err != nil {
		return err
	}
	// A backup, as cns db backup writes it.
	f, err := os.OpenFile(backup, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := st.Backup(f); err != nil {
		f.Close()
		return err
	}
	if err := durable.Close(f); err != nil {
		return err
	}
	// Every VM moved: a sparse file.
	if err := commit("commit 2", moves(2, vms)); err != nil {
		return err
	}
	if _, err := st.CompactLive(); err != nil {
		return fmt.Errorf("live compaction: %w", err)
	}
	if err := snapshot("live compaction"); err != nil {
		return err
	}
	if err := commit("commit after the live compaction", moves(3, 10)); err != nil {
		return err
	}
	// Sparse again, for the offline compaction.
	if err := commit("commit 4", moves(4, vms)); err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	st = nil
	if _, err := Compact(path); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	if st, err = Open(path, Options{ReadOnly: true}); err != nil {
		return err
	}
	if err := snapshot("offline compaction"); err != nil {
		return err
	}
	st.Close()
	st = nil
	if err := Restore(backup, path); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if st, err = Open(path, Options{}); err != nil {
		return err
	}
	if why, _ := st.SerialsUnverified(); why == "" {
		return errors.New("the restored file is not marked unverified")
	}
	if err := snapshot("restore"); err != nil {
		return err
	}
	return commit("commit on the restored file", moves(5, 10))
}

// contentsDigest digests every key and value of the file.
func contentsDigest(d *DB) (string, error) {
	c, err := contentsErr(d)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(c)) {
		v := c[k]
		h.Write([]byte(k))
		h.Write(v[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}
