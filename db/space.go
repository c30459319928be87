package db

import (
	bolt "go.etcd.io/bbolt"
)

// BucketSpace is the file space one bucket's pages take.
type BucketSpace struct {
	// Name is the bucket's path: "vms", "vmhash", "zones/<zone>/names",
	// "zones/<zone>/journal", ...
	Name  string `json:"name"`
	Keys  int    `json:"keys"`
	Bytes int64  `json:"bytes"`  // in the bucket's pages
	InUse int64  `json:"in_use"` // of those, holding keys and values
}

// Space reports the pages each bucket takes (each zone's names and
// journal apart, other buckets with what they nest) and the file's
// high-water mark: the end of the last page in use or free. Pages up to
// it that no bucket takes are free (or bbolt's meta and freelist). It
// reads every page: for `cns db info --space`, not for a server.
func (d *DB) Space() (buckets []BucketSpace, highWater int64, err error) {
	err = d.view(func(tx *bolt.Tx) error {
		highWater = tx.Size()
		add := func(name string, b *bolt.Bucket) {
			s := b.Stats()
			buckets = append(buckets, BucketSpace{Name: name, Keys: s.KeyN,
				Bytes: int64(s.BranchAlloc + s.LeafAlloc), InUse: int64(s.BranchInuse + s.LeafInuse)})
		}
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if string(name) != string(bucketZones) {
				add(string(name), b)
				return nil
			}
			return b.ForEachBucket(func(zone []byte) error {
				zb := b.Bucket(zone)
				return zb.ForEachBucket(func(sub []byte) error {
					add("zones/"+string(zone)+"/"+string(sub), zb.Bucket(sub))
					return nil
				})
			})
		})
	})
	return buckets, highWater, err
}
