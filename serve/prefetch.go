//go:build amd64 || arm64

package serve

// prefetchLines asks the processor to bring the cache line at each address
// into its caches and returns at once (PREFETCHT0, PRFM PLDL1KEEP): unlike
// a load, a prefetch does not hold up the instructions behind it while the
// line comes from memory, and it never faults, whatever the address. Go
// has no prefetch intrinsic outside its runtime.
//
//go:noescape
func prefetchLines(addrs []uintptr)
