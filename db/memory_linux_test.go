package db

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestReadAheadFillsPageCache drops a file from the page cache and checks
// that readAhead brings every page of it back without it being read.
func TestReadAheadFillsPageCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	const size = 3*readAheadStep + 12345 // not a whole number of steps
	if err := os.WriteFile(path, bytes.Repeat([]byte{7}, size), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil { // only clean pages leave the cache
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	pages := func() (cached, all int) {
		vec := make([]byte, (size+os.Getpagesize()-1)/os.Getpagesize())
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatal(errno)
		}
		for _, v := range vec {
			cached += int(v & 1)
		}
		return cached, len(vec)
	}
	if cached, all := pages(); cached == all {
		t.Skip("the file system keeps the file in memory (tmpfs?): nothing to read ahead")
	}
	if err := readAhead(path); err != nil {
		t.Fatal(err)
	}
	// The reads run in the background; no event says they are done.
	deadline := time.Now().Add(10 * time.Second)
	for {
		cached, all := pages()
		if cached == all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pages in the page cache 10 s after readAhead", cached, all)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
