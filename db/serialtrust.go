package db

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/tritondatacenter/cns/db/durable"
)

// Serial trust. A zone's stored serial is only known to be the newest one
// the secondaries have seen if this file has been in use all along. A file
// created empty (the db was lost) or installed from a backup (`cns db
// restore`) can hold serials below what the secondaries hold, and every
// RFC 1982 secondary ignores a primary whose serial went back. Such a file
// carries meta/serials-unverified (why, as text) until the server has
// asked the secondaries for their serials and moved past them.

var keyUnverified = []byte("serials-unverified")

// SerialsUnverified returns why the stored serials cannot be trusted
// ("created empty", "restored from …"), or "" when they can.
func (d *DB) SerialsUnverified() (string, error) {
	var why string
	err := d.view(func(tx *bolt.Tx) error {
		why = string(tx.Bucket(bucketMeta).Get(keyUnverified))
		return nil
	})
	return why, err
}

// MarkSerialsVerified records that every zone's serial has been compared
// with what its secondaries hold.
func (d *DB) MarkSerialsVerified() error {
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	return d.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Delete(keyUnverified)
	})
}

// RaiseSerial gives zone a new version whose serial is past floor, unless
// its serial already is. It returns the commit (nil Zones when nothing
// changed).
func (d *DB) RaiseSerial(zone string, floor uint32, cause string) (*Committed, error) {
	return d.Commit(&ChangeSet{SerialFloors: map[string]uint32{zone: floor}, Cause: cause})
}

// ForgetJournalFrom drops zone's journal entries up to and including the
// one that starts from serial, and reports whether there was one. The
// serial check calls it for a serial a secondary holds while this file
// cannot vouch for its own: the file may have reused that serial (its
// commits before the check moved past the secondaries), so the
// secondary's version of the zone at it is not the one the entry starts
// from, and an IXFR from it would be applied to the wrong zone. It gets
// the whole zone instead. Older entries go too: the journal stays one
// chain ending at the zone's serial.
func (d *DB) ForgetJournalFrom(zone string, serial uint32) (bool, error) {
	if d.opts.ReadOnly {
		return false, ErrReadOnly
	}
	found := false
	err := d.update(func(tx *bolt.Tx) error {
		zb := tx.Bucket(bucketZones).Bucket([]byte(zone))
		if zb == nil {
			return nil
		}
		jb := zb.Bucket(bucketJournal)
		var through []byte
		jb.ForEach(func(k, v []byte) error {
			if from, _, _, ok := journalHeader(v); ok && from == serial && through == nil {
				through = bytes.Clone(k)
			}
			return nil
		})
		if through == nil {
			return nil
		}
		found = true
		m, err := decodeZoneMeta(zb.Get(keyZoneMeta))
		if err != nil {
			return err
		}
		c := jb.Cursor()
		for k, v := c.First(); k != nil && bytes.Compare(k, through) <= 0; k, v = c.First() {
			m.JEntries--
			m.JBytes -= uint64(len(v))
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return zb.Put(keyZoneMeta, m.encode())
	})
	return found, err
}

// raiseSerials marks the zones whose serial must pass a floor: the next
// serial is at least floor+1, which must come after the current serial
// (RFC 1982). A floor behind the serial is passed already; one 2^31 - 1
// or more ahead cannot be passed in one step (RFC 1982 §7 needs two).
// Such zones are left alone.
func (c *commit) raiseSerials(floors map[string]uint32) error {
	for name, floor := range floors {
		z, err := c.zone(name)
		if err != nil {
			return err
		}
		if z == nil || !z.exists || z.remove {
			continue
		}
		if !SerialLess(z.meta.Serial, floor+1) {
			continue
		}
		z.floor, z.raise = floor, true
	}
	return nil
}

// Restore installs the db file backup at path, marked so that the server
// compares its serials with the secondaries' before announcing any. It
// refuses a path a running server holds (bbolt's file lock) and a backup
// that is not a sound cns db. The old file, if any, is replaced
// atomically.
func Restore(backup, path string) error {
	src, err := Open(backup, Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	probs, err := src.Check()
	src.Close()
	if err != nil {
		return fmt.Errorf("backup %s: %w", backup, err)
	}
	if len(probs) > 0 {
		return fmt.Errorf("backup %s fails the check (%d problems, first: %s)", backup, len(probs), probs[0])
	}
	// Hold the current file's lock while it is replaced, so a server cannot
	// start on it meanwhile; a server holding it already makes this fail.
	if _, err := os.Stat(path); err == nil {
		old, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 100 * time.Millisecond})
		if errors.Is(err, bolterrors.ErrTimeout) {
			return fmt.Errorf("restore to %s: %w", path, ErrLocked)
		}
		if err == nil {
			defer old.Close()
		} // else: a damaged file, which restoring replaces
	}
	tmp, err := copyToTemp(backup, path)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	dst, err := Open(tmp, Options{})
	if err != nil {
		return err
	}
	why := fmt.Sprintf("restored from %s at %s", backup, time.Now().UTC().Format(time.RFC3339))
	err = dst.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyUnverified, []byte(why))
	})
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return durable.Rename(tmp, path)
}

// copyToTemp copies src next to path, 0600, synced, and returns the
// copy's name.
func copyToTemp(src, path string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return "", err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chmod(0o600)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out.Name())
		return "", err
	}
	return out.Name(), nil
}
