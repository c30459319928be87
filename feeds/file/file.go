// Package file is the inventory file feed: a JSON file holding exactly what
// the SDC APIs return (sdc.Inventory), watched for changes. It is the
// source of truth when the configuration sets inventory_file, which is how
// cns runs without a data center (demos, tests, benchmarks).
package file

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/sdc"
)

// FeedName is how this feed reports its health.
const FeedName = "inventory_file"

// Feed watches one inventory file and hands every good version of it to
// the updater as one complete inventory.
type Feed struct {
	Path    string
	Updater *feeds.Updater
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
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		fi, err := os.Stat(f.Path)
		switch {
		case err != nil:
			f.Updater.ReportFeed(FeedName, err)
		case lastStat == nil || !fi.ModTime().Equal(lastStat.ModTime()) || fi.Size() != lastStat.Size():
			lastStat = fi
			data, err := os.ReadFile(f.Path)
			if err != nil {
				f.Updater.ReportFeed(FeedName, err)
				break
			}
			sum := sha256.Sum256(data)
			if sum == lastSum {
				break
			}
			inv, err := Parse(data)
			if err != nil {
				err = fmt.Errorf("%s: %w (keeping the previous inventory)", f.Path, err)
				log.Error("inventory rejected", "err", err)
				f.Updater.ReportFeed(FeedName, err)
				lastSum = sum // report a bad version once, not every tick
				break
			}
			lastSum = sum
			cause := "inventory file changed"
			if first {
				cause = "inventory file loaded"
			}
			first = false
			f.Updater.SetInventory(inv, cause)
			f.Updater.ReportFeed(FeedName, nil)
			log.Info("inventory applied", "file", f.Path, "vms", len(inv.VMs), "users", len(inv.Users), "servers", len(inv.Servers))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Load reads and validates an inventory file.
func Load(path string) (*sdc.Inventory, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	inv, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return inv, nil
}

// Parse decodes and validates an inventory. Errors name the object and
// field at fault ("vms[3] (uuid): nics: ...") or the line and column of a
// syntax error.
func Parse(data []byte) (*sdc.Inventory, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, describeJSONError(data, err)
	}
	inv := &sdc.Inventory{}
	sections := []struct {
		key  string
		into func(json.RawMessage) error
	}{
		{"vms", func(r json.RawMessage) error { return decodeList(r, "vms", &inv.VMs) }},
		{"servers", func(r json.RawMessage) error { return decodeList(r, "servers", &inv.Servers) }},
		{"users", func(r json.RawMessage) error { return decodeList(r, "users", &inv.Users) }},
		{"networks", func(r json.RawMessage) error { return decodeList(r, "networks", &inv.Networks) }},
		{"network_pools", func(r json.RawMessage) error { return decodeList(r, "network_pools", &inv.NetworkPools) }},
	}
	known := map[string]bool{}
	for _, s := range sections {
		known[s.key] = true
		if raw, ok := top[s.key]; ok {
			if err := s.into(raw); err != nil {
				return nil, err
			}
		}
	}
	for k := range top {
		if !known[k] {
			return nil, fmt.Errorf("unknown top-level key %q (want vms, servers, users, networks, network_pools)", k)
		}
	}
	if err := inv.Validate(); err != nil {
		return nil, err
	}
	return inv, nil
}

// decodeList decodes a JSON array element by element so an error can say
// which element is wrong.
func decodeList[T any](raw json.RawMessage, key string, into *[]T) error {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return fmt.Errorf("%s: want an array: %w", key, err)
	}
	out := make([]T, len(items))
	for i, item := range items {
		if err := json.Unmarshal(item, &out[i]); err != nil {
			return fmt.Errorf("%s[%d]%s: %w", key, i, idOf(item), fieldError(err))
		}
	}
	*into = out
	return nil
}

// idOf returns " (uuid)" when the item has a readable uuid.
func idOf(item json.RawMessage) string {
	var v struct {
		UUID string `json:"uuid"`
	}
	if json.Unmarshal(item, &v) == nil && v.UUID != "" {
		return " (" + v.UUID + ")"
	}
	return ""
}

// fieldError rewrites encoding/json type errors into "field: want T, got V".
func fieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("%s: want %s, got %s", te.Field, te.Type, te.Value)
	}
	return err
}

// describeJSONError adds the line and column to a syntax error.
func describeJSONError(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + bytes.Count(data[:se.Offset], []byte("\n"))
		col := int(se.Offset) - bytes.LastIndexByte(data[:se.Offset], '\n')
		return fmt.Errorf("line %d, column %d: %v", line, col, err)
	}
	return fieldError(err)
}
