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
	return d.view(func(tx *bolt.Tx) error {
		return releaseMapping(tx.DB().Info().Data, uintptr(tx.Size()))
	})
}

// ReadAhead asks the OS to read the whole file into the page cache, in
// large reads, and returns once it has asked; the reads go on meanwhile.
// After a reboot, or once the page cache has dropped the file, the first
// scans of a restart (the warm-up, a transfer sent from the store) would
// otherwise read it a page per fault: bbolt maps the file MADV_RANDOM,
// which turns read-ahead off. A 1M-VM file (1.8 GB) read that way cost a
// transfer 6.8 CPU s of page faults and I/O instead of 1.4 s; read ahead
// it is in the page cache within a second, for ~0.2 CPU s (~10 ms when it
// is already there).
func (d *DB) ReadAhead() error {
	return readAhead(d.file.Load().Path())
}

// scanReleaseEvery is how many bytes of keys and values a scan of a
// whole bucket reads between two releases of the mapped pages.
const scanReleaseEvery = 256 << 10

// forEachReleasing is b.ForEach for a read of a whole bucket (a restart's
// reads, a warm-up): it releases the mapped pages as it goes. A page
// fault maps the pages around the one touched that the page cache holds
// too, so a scan of a bucket scattered through the file leaves several
// times the bucket's size resident (the 11 MB vmhash bucket of a 100k-VM
// file left 64 MB; releasing every 8 MiB of zone names left up to 150 MB
// resident, every 1 MiB up to 80 MB), and all of it counted in the peak
// of every restart. The mapping cannot move while tx is open.
func (d *DB) forEachReleasing(tx *bolt.Tx, b *bolt.Bucket, fn func(k, v []byte) error) error {
	read := 0
	err := b.ForEach(func(k, v []byte) error {
		if read += len(k) + len(v); read >= scanReleaseEvery {
			read = 0
			releaseMapping(tx.DB().Info().Data, uintptr(tx.Size()))
		}
		return fn(k, v)
	})
	releaseMapping(tx.DB().Info().Data, uintptr(tx.Size()))
	return err
}
