package db

import "golang.org/x/sys/unix"

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
