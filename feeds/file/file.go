// Package file is the inventory file feed: a JSON file holding exactly what
// the SDC APIs return (dc.Inventory), watched for changes. It is the
// source of truth when the configuration sets inventory_file, which is how
// cns runs without a data center (demos, tests, benchmarks).
package file

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// FeedName is how this feed reports its health.
const FeedName = "inventory_file"

// Feed watches one inventory file and hands every good version of it to
// the sink (the updater) as one complete inventory.
type Feed struct {
	Path string
	Sink dc.Sink // the updater
	// Interval is how often the file is checked (default 200 ms, so an
	// edit is applied well within a second).
	Interval time.Duration
	Logger   *slog.Logger
}

// Run applies the file now and on every change until ctx ends. A file that
// cannot be read or does not validate is reported and ignored: the last
// good inventory stays in force.
func (f *Feed) Run(ctx context.Context) error {
	interval := f.Interval
	if interval == 0 {
		interval = 200 * time.Millisecond
	}
	log := f.Logger
	if log == nil {
		log = slog.Default()
	}
	var lastStat os.FileInfo
	var lastSum [sha256.Size]byte
	first := true
	// applied: the file as it is now was applied. Each check that finds
	// it unchanged says so again: it is fresh data for the guard on mass
	// removals (a truncated file that stays truncated confirms its
	// shrink).
	applied := false
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		fi, err := os.Stat(f.Path)
		switch {
		case err != nil:
			applied = false
			f.Sink.ReportFeed(FeedName, err)
		case lastStat == nil || !fi.ModTime().Equal(lastStat.ModTime()) || fi.Size() != lastStat.Size():
			lastStat = fi
			sum, err := sumFile(f.Path)
			if err != nil {
				applied = false
				f.Sink.ReportFeed(FeedName, err)
				break
			}
			if sum == lastSum {
				if applied {
					f.Sink.ReportFeed(FeedName, nil)
				}
				break
			}
			applied = false
			lastSum = sum // (a bad version is reported once, not every tick)
			// The VMs go into the listing as they are read: neither the
			// file nor every decoded VM is held (dc.ReadInventoryFile).
			l := f.Sink.BeginListing()
			inv, vms, err := dc.ReadInventoryFile(f.Path, l.Add)
			if err != nil {
				err = fmt.Errorf("%w (keeping the previous inventory)", err)
				log.Error("inventory rejected", "err", err)
				f.Sink.ReportFeed(FeedName, err)
				break
			}
			inv.Listing = l
			cause := "inventory file changed"
			if first {
				cause = "inventory file loaded"
			}
			first = false
			f.Sink.SetInventory(inv, cause)
			f.Sink.ReportFeed(FeedName, nil)
			applied = true
			log.Info("inventory applied", "file", f.Path, "vms", vms, "users", len(inv.Users), "servers", len(inv.Servers))
		case applied:
			f.Sink.ReportFeed(FeedName, nil)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// sumFile returns the SHA-256 of the file at path, read as a stream.
func sumFile(path string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	f, err := os.Open(path)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, err
	}
	h.Sum(sum[:0])
	return sum, nil
}
