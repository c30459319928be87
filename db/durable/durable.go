// Package durable writes files so that a power cut cannot take back what
// a call has returned: a file's bytes are fsynced before it is named, and
// every name made, replaced or removed is fsynced in its directory. The
// kernel promises neither on its own: a renamed or created file whose
// directory was not synced may be gone after a power cut, synced bytes
// and all (db/powercut's tests show each case).
//
// cns writes few files: the db (bbolt syncs its own pages; the db's
// creation, compaction and restore name files through here), backups,
// and the config file cnsadm edits.
package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// SyncDir fsyncs the directory dir: the names in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Rename renames from to to and syncs the directories of both: after a
// power cut, to names the file from held.
func Rename(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	if err := SyncDir(filepath.Dir(to)); err != nil {
		return err
	}
	if filepath.Dir(from) != filepath.Dir(to) {
		return SyncDir(filepath.Dir(from))
	}
	return nil
}

// MkdirAll makes dir and the directories above it that are missing, as
// os.MkdirAll does, and syncs the directory each was made in.
func MkdirAll(dir string, perm fs.FileMode) error {
	dir = filepath.Clean(dir)
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: errors.New("not a directory")}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return SyncDir(parent)
}

// Close syncs f, closes it and syncs its directory: a file created and
// written through f is there, whole, after a power cut.
func Close(f *os.File) error {
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return SyncDir(filepath.Dir(f.Name()))
}

// WriteFile replaces path with data atomically and durably: a temporary
// file beside it, synced, renamed over it, the directory synced. After a
// power cut path holds the old bytes or the new, never a mix and never
// nothing. perm applies to a new file; an existing one keeps its mode.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a failure; renamed away on success
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return Rename(tmp.Name(), path)
}
