package sdcsim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// pollInterval is how often Run looks at the inventory file.
const pollInterval = 200 * time.Millisecond

// Run is `cns sim`: it starts a simulator over the inventory file, prints
// its configuration (Config) as one JSON object on the first line of
// stdout, then watches the file and turns every edit into the mutations
// that produce it, with their changefeed items and changelog entries. A
// file that does not parse or validate is logged and ignored. Run returns
// when ctx is done.
//
// Run uses the default Options: changefeed items are delivered as soon as
// they are published (VMAPI sweeps every 2 s), once per listener
// (changefeed 1.4.0), without resourceObject. RunWithOptions takes others.
func Run(ctx context.Context, inventoryPath string, stdout io.Writer, log *slog.Logger) error {
	return RunWithOptions(ctx, inventoryPath, stdout, log, Options{})
}

// RunWithOptions is Run with simulator options (delivery interval, 1.5.x
// fan-out, and so on); opts.Logger is replaced by log.
func RunWithOptions(ctx context.Context, inventoryPath string, stdout io.Writer, log *slog.Logger, opts Options) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	raw, err := os.ReadFile(inventoryPath)
	if err != nil {
		return fmt.Errorf("sdcsim: %w", err)
	}
	inv, err := dc.ParseInventory(raw)
	if err != nil {
		return fmt.Errorf("sdcsim: %s: %w", inventoryPath, err)
	}
	opts.Logger = log
	sim, err := New(*inv, opts)
	if err != nil {
		return err
	}
	defer sim.Close()

	line, err := json.Marshal(sim.Config())
	if err != nil {
		return fmt.Errorf("sdcsim: encode config: %w", err)
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		return fmt.Errorf("sdcsim: write config: %w", err)
	}
	log.Info("sdc simulator running", "inventory", inventoryPath,
		"vmapi", sim.VMAPIURL(), "cnapi", sim.CNAPIURL(), "napi", sim.NAPIURL(),
		"ldap", sim.LDAPURL(), "ldaps", sim.LDAPSURL())

	w := fileWatch{path: inventoryPath, sum: sha256.Sum256(raw)}
	w.stat()
	applied := *inv
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		b, changed := w.poll()
		if !changed {
			continue
		}
		next, err := dc.ParseInventory(b)
		if err != nil {
			log.Error("sdc simulator: inventory edit ignored", "file", inventoryPath, "err", err)
			continue
		}
		n := sim.Apply(applied, *next)
		applied = *next
		log.Info("sdc simulator: inventory edit applied", "mutations", n)
	}
}

// fileWatch notices edits by polling size and mtime, and confirms them by
// content hash, so a touch or a rewrite with the same bytes is no edit.
type fileWatch struct {
	path  string
	size  int64
	mtime time.Time
	sum   [32]byte
}

func (w *fileWatch) stat() bool {
	fi, err := os.Stat(w.path)
	if err != nil {
		return false
	}
	// Two same-size writes within one tick of a coarse file system clock
	// share an mtime: while the mtime is recent, look at the content anyway.
	changed := fi.Size() != w.size || !fi.ModTime().Equal(w.mtime) || time.Since(fi.ModTime()) < 2*time.Second
	w.size, w.mtime = fi.Size(), fi.ModTime()
	return changed
}

func (w *fileWatch) poll() ([]byte, bool) {
	if !w.stat() {
		return nil, false
	}
	b, err := os.ReadFile(w.path)
	if err != nil {
		return nil, false
	}
	sum := sha256.Sum256(b)
	if sum == w.sum {
		return nil, false
	}
	w.sum = sum
	return b, true
}

// Apply turns the difference between two inventories into mutations of
// the world, as the real services would see them: VMs created, changed
// (one changefeed item each) or gone (destroyed, still listed); users
// added, changed or removed (one changelog entry each); servers, networks
// and pools replaced or removed. It returns the number of mutations.
func (s *Sim) Apply(old, cur dc.Inventory) int {
	n := 0
	count := func(err error) {
		if err != nil && !errors.Is(err, ErrNotFound) {
			s.log.Error("sdc simulator: apply", "err", err)
			return
		}
		if err == nil {
			n++
		}
	}

	// Networks and pools first, so VMs never name a network NAPI lacks.
	oldNets := byUUID(old.Networks, func(x dc.Network) string { return x.UUID })
	for _, x := range cur.Networks {
		if prev, ok := oldNets[x.UUID]; !ok || !reflect.DeepEqual(prev, x) {
			count(s.PutNetwork(x))
		}
		delete(oldNets, x.UUID)
	}
	oldPools := byUUID(old.NetworkPools, func(x dc.NetworkPool) string { return x.UUID })
	for _, x := range cur.NetworkPools {
		if prev, ok := oldPools[x.UUID]; !ok || !reflect.DeepEqual(prev, x) {
			count(s.PutNetworkPool(x))
		}
		delete(oldPools, x.UUID)
	}
	oldServers := byUUID(old.Servers, func(x dc.Server) string { return x.UUID })
	for _, x := range cur.Servers {
		if prev, ok := oldServers[x.UUID]; !ok || !sameJSON(prev, x) {
			count(s.PutServer(x))
		}
		delete(oldServers, x.UUID)
	}
	for u := range oldServers {
		count(s.RemoveServer(u))
	}

	oldUsers := byUUID(old.Users, func(x dc.User) string { return x.UUID })
	for _, x := range cur.Users {
		prev, ok := oldUsers[x.UUID]
		delete(oldUsers, x.UUID)
		if !ok {
			if _, exists := s.User(x.UUID); !exists {
				count(s.AddUser(x))
				continue
			}
		}
		if prev == x {
			continue
		}
		changes := map[string]string{}
		if prev.Login != x.Login {
			changes["login"] = x.Login
		}
		if prev.TritonCNSEnabled != x.TritonCNSEnabled {
			changes["triton_cns_enabled"] = x.TritonCNSEnabled
		}
		if prev.ApprovedForProvisioning != x.ApprovedForProvisioning {
			changes["approved_for_provisioning"] = x.ApprovedForProvisioning
		}
		count(s.SetUserAttrs(x.UUID, changes))
	}
	for u := range oldUsers {
		count(s.RemoveUser(u))
	}

	oldVMs := byUUID(old.VMs, func(x dc.VM) string { return x.UUID })
	for _, x := range cur.VMs {
		prev, ok := oldVMs[x.UUID]
		delete(oldVMs, x.UUID)
		if ok && sameJSON(prev, x) {
			continue
		}
		count(s.PutVM(x))
	}
	for u := range oldVMs {
		if vm, ok := s.VM(u); ok && vm.State != "destroyed" {
			count(s.DestroyVM(u))
		}
	}

	for u := range oldPools {
		count(s.RemoveNetworkPool(u))
	}
	for u := range oldNets {
		count(s.RemoveNetwork(u))
	}
	return n
}

func byUUID[T any](xs []T, key func(T) string) map[string]T {
	m := make(map[string]T, len(xs))
	for _, x := range xs {
		m[key(x)] = x
	}
	return m
}

func sameJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}
