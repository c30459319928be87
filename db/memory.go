package db

import bolt "go.etcd.io/bbolt"

// ReleaseMemory tells the OS that the pages of the mapped file this
// process touched are not needed now: they leave the process's resident
// set (staying in the page cache) and are read back on demand. Worth
// calling after the serving tables are built from the file and after
// large loads, so the resident size reflects what cns really holds.
//
// It runs inside a read transaction: bbolt only remaps the file under
// its exclusive mmap lock, so the mapping cannot move meanwhile.
func (d *DB) ReleaseMemory() error {
	return d.bolt.View(func(tx *bolt.Tx) error {
		return releaseMapping(d.bolt.Info().Data, uintptr(tx.Size()))
	})
}
