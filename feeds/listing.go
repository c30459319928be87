package feeds

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/guard"
)

// listing is a complete listing of the VMs in the making (dc.Listing),
// from BeginListing to SetInventory: the facts of its VMs, computed as the
// feed reads them, and where it began among the changes (overtakes). A
// listing holds what the model will hold of each VM, ~250 bytes, where
// the decoded VMs of a listing held whole took ~2.8 KB each: 2.8 GB for a
// million, which the collector then let grow to twice that.
type listing struct {
	start uint64 // BeginListing's (overtakes); 0: nothing overtakes it
	facts []vmFacts
	strs  map[string]string // owner and server UUIDs, held once
}

// BeginListing starts a listing: the feed adds the VMs it reads to it and
// hands it to SetInventory (dc.Inventory.Listing), and the changes until
// then overtake it.
func (u *Updater) BeginListing() dc.Listing {
	u.mu.Lock()
	defer u.mu.Unlock()
	return &listing{start: u.overtakes.begin()}
}

// Add computes the facts of vms, on every core, and keeps them.
func (l *listing) Add(vms []dc.VM) {
	if l.strs == nil {
		l.strs = map[string]string{}
	}
	at := len(l.facts)
	l.facts = append(l.facts, make([]vmFacts, len(vms))...)
	out := l.facts[at:]
	workers := min(runtime.GOMAXPROCS(0), 1+len(vms)/256)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { // a contiguous share
			for i := w * len(vms) / workers; i < (w+1)*len(vms)/workers; i++ {
				out[i] = factsOf(&vms[i])
			}
		})
	}
	wg.Wait()
	for i := range out {
		out[i].owner, out[i].server = l.intern(out[i].owner), l.intern(out[i].server)
	}
}

// intern returns the listing's copy of s.
func (l *listing) intern(s string) string {
	if v, ok := l.strs[s]; ok {
		return v
	}
	l.strs[s] = s
	return s
}

// SetInventory applies a complete description of the data center: VMs
// missing from it are gone. This is what the file feed and a full SDC
// listing give: the VMs read into inv.Listing (BeginListing), and
// inv.VMs.
//
// The VMs are put in slices of the scheduler's, u.mu let go between them
// (1M VMs: ~2.8 s in all), so that what reads the updater does not wait
// for the whole listing; no batch is computed meanwhile (listing), as a
// sorted snapshot of a half-put first listing would scatter its chunks.
// Listings are applied one at a time. A change that lands between two
// slices, or came after the listing began, overtakes it (overtakes): the
// listing is applied around the VMs it changed.
func (u *Updater) SetInventory(inv *dc.Inventory, cause string) {
	l := &listing{}
	if inv.Listing != nil {
		var ok bool
		if l, ok = inv.Listing.(*listing); !ok {
			panic("feeds: SetInventory of a listing the updater did not begin")
		}
	}
	l.Add(inv.VMs) // (before the lock: it takes seconds at 1M VMs)
	facts := l.facts
	l.facts = nil // put, they are the model's
	u.listingMu.Lock()
	defer u.listingMu.Unlock()
	u.lock()
	defer u.mu.Unlock()
	defer u.overtakes.done(l.start)
	u.setUsers(u.ownersKept(inv.Users, l.start), cause)
	u.setNetworks(inv.Networks, inv.NetworkPools, cause)
	u.setServers(inv.Servers, cause)
	u.sawServers(u.now())
	// A first listing (a first load, a restart) puts and marks every VM:
	// its maps are sized once, not grown by doubling. A later one marks
	// only what changed, so the maps stay as they are.
	first := len(u.vms) == 0
	if first {
		u.vms = make(map[string]*storedVM, len(facts))
		u.sched.sizeFor(len(facts))
	}
	u.listing = true
	// Nothing held, nothing stored: nothing can be gone, and a fresh data
	// center's first listing needs no set of its UUIDs.
	var listed map[string]bool
	if !first || len(u.hashes) > 0 || len(u.overtakes.vms) > 0 {
		u.mu.Unlock()
		listed = make(map[string]bool, len(facts))
		for _, f := range facts {
			listed[f.uuid] = true
		}
		u.mu.Lock()
	}
	for i, f := range facts {
		u.between(i)
		if c, ok := u.overtakes.of(f.uuid, l.start); ok && c.keeps(f.modified) {
			continue // a change after the listing began (or between its slices) holds a newer state
		}
		u.putVM(f, cause)
	}
	if listed != nil {
		u.forgetUnlisted(listed, l.start, cause)
	}
	u.listing = false
	u.haveFull = true
	u.upstreamAnswered(guard.Causes...) // its compute nodes and owners too
	u.wake()
}

// between lets go of u.mu before the i-th step of a listing's work, once
// every slice of the scheduler's; u.mu is held.
func (u *Updater) between(i int) {
	if i == 0 || i%u.sched.slice != 0 {
		return
	}
	u.mu.Unlock()
	if u.sched.hooks.betweenListingSlices != nil {
		u.sched.hooks.betweenListingSlices()
	}
	u.mu.Lock()
}

// forgetUnlisted forgets the VMs held or stored that a complete listing
// begun at since does not list, but those a change brought after it
// began; u.mu is held, let go of now and then (between).
func (u *Updater) forgetUnlisted(listed map[string]bool, since uint64, cause string) {
	g := &u.guard
	g.listings++
	listing := fmt.Sprintf("listing %d.%d", g.epoch, g.listings)
	unlisted := func(uuid string, v *storedVM) {
		u.mark(uuid)
		u.causes[cause]++
		if g.unlisted[uuid] == nil {
			g.unlisted[uuid] = &unlistedVM{listing: listing, vm: v} // (the first listing that missed it)
		}
	}
	i := 0
	for uuid, v := range u.vms {
		u.between(i)
		i++
		if c, ok := u.overtakes.of(uuid, since); ok && !c.removed {
			continue
		}
		if !listed[uuid] && u.servers[uuid] == nil && u.model.removeVM(uuid) {
			unlisted(uuid, v)
		}
	}
	for uuid := range u.hashes {
		u.between(i)
		i++
		// (A compute node's CMON names are not a VM's.)
		if !listed[uuid] && u.vms[uuid] == nil && u.servers[uuid] == nil && !ExternalUUID(uuid) {
			unlisted(uuid, nil) // stored but gone while cns was not looking
		}
	}
}
