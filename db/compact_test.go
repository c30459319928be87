package db

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestCompact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cns.db")
	d, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	const zone = "dc.example.com"
	mustCommit(t, d, &ChangeSet{Zones: testConfig()})
	// 2000 VMs, then all but one destroyed: the file keeps its size.
	var add, del []VMChange
	for i := range 2000 {
		uuid := fmt.Sprintf("%08x-1111-4111-8111-111111111111", i)
		add = append(add, VMChange{UUID: uuid, Records: []Record{rec(t, zone, fmt.Sprintf("v%d.dc.example.com. 30 IN A 10.0.%d.%d", i, i>>8, i&255))}})
		if i > 0 {
			del = append(del, VMChange{UUID: uuid, Delete: true})
		}
	}
	mustCommit(t, d, &ChangeSet{VMs: add})
	mustCommit(t, d, &ChangeSet{VMs: del})
	serial := zoneSerial(t, d, zone)

	// A running server's file is refused.
	if _, err := Compact(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("compact of an open file: %v, want ErrLocked", err)
	}
	d.Close()

	res, err := Compact(path)
	if err != nil {
		t.Fatal(err)
	}
	if res.After >= res.Before {
		t.Fatalf("compaction did not shrink the file: %d -> %d bytes", res.Before, res.After)
	}
	t.Logf("compacted %d -> %d bytes", res.Before, res.After)
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != res.After || fi.Mode().Perm() != 0o600 {
		t.Fatalf("compacted file: %v %v", fi, err)
	}
	d, err = Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := zoneSerial(t, d, zone); got != serial {
		t.Fatalf("serial %d after compaction, want %d", got, serial)
	}
	if got := published(t, d, zone, "v0.dc.example.com."); len(got) != 1 {
		t.Fatalf("v0 after compaction: %v", got)
	}
	if probs, err := d.Check(); err != nil || len(probs) > 0 {
		t.Fatalf("check: %v %v", probs, err)
	}
}
