//go:build !linux

package db

// releaseMapping is a no-op where MADV_DONTNEED on a shared file mapping
// is not known to keep the file's contents.
func releaseMapping(addr, size uintptr) error { return nil }

// readAhead is left to the OS's own read-ahead elsewhere.
func readAhead(path string) error { return nil }
