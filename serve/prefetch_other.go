//go:build !amd64 && !arm64

package serve

// prefetchLines does nothing where cns has no prefetch instruction in
// assembly: the transfer then waits for each line as it reads it.
func prefetchLines(addrs []uintptr) {}
