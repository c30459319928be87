package db

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

func releaseMapping(addr, size uintptr) error {
	if size == 0 {
		return nil
	}
	_, _, errno := unix.Syscall(unix.SYS_MADVISE, addr, size, unix.MADV_DONTNEED)
	if errno != 0 {
		return errno
	}
	return nil
}

// readAheadStep is how much one POSIX_FADV_WILLNEED asks for: the kernel
// reads at most the device's read-ahead window or largest I/O per call
// (128 KiB and more; 8 MiB here), so a step above both would leave holes.
const readAheadStep = 512 << 10

// readAhead asks for the steps of the file that the page cache does not
// hold. Asking for a cached step is not free either (the kernel looks up
// each of its pages): for a cached 1.8 GB file that was ~10-40 ms of CPU
// in the first moments of a restart, which delayed the first answer by
// ~50 ms in a 40 % quota. mincore over a mapping of the file says which
// steps to skip; without it (a mapping refused) every step is asked for.
func readAhead(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	var cached []byte
	if size > 0 && int64(int(size)) == size {
		if m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED); err == nil {
			defer unix.Munmap(m)
			cached = make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
			if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&cached[0]))); errno != 0 {
				cached = nil
			}
		}
	}
	for _, off := range stepsToRead(size, cached, os.Getpagesize()) {
		if err := unix.Fadvise(int(f.Fd()), off, readAheadStep, unix.FADV_WILLNEED); err != nil {
			return err
		}
	}
	return nil
}

// stepsToRead returns the offsets of the readAheadStep-long steps of a
// file of size bytes that hold a page not in the page cache: cached is
// mincore's vector (bit 0 of a page's byte set when it is cached), nil
// when not known (then every step).
func stepsToRead(size int64, cached []byte, pageSize int) []int64 {
	var steps []int64
	perStep := readAheadStep / pageSize
	for off := int64(0); off < size; off += readAheadStep {
		if cached == nil {
			steps = append(steps, off)
			continue
		}
		first := int(off) / pageSize
		for _, c := range cached[first:min(first+perStep, len(cached))] {
			if c&1 == 0 {
				steps = append(steps, off)
				break
			}
		}
	}
	return steps
}
