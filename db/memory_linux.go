package db

import (
	"os"

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
	for off := int64(0); off < fi.Size(); off += readAheadStep {
		if err := unix.Fadvise(int(f.Fd()), off, readAheadStep, unix.FADV_WILLNEED); err != nil {
			return err
		}
	}
	return nil
}
