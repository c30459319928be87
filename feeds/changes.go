package feeds

import (
	"encoding/binary"
	"encoding/json"
	"hash"
	"hash/fnv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/guard"
	"github.com/tritondatacenter/cns/feeds/records"
)

// change builds the change of one VM. ok is false when the VM cannot be
// recomputed now (its owner is unknown): its stored records stay. cand is
// not nil when the change would take names for a guarded cause (the
// guard on mass removals).
func (u *Updater) change(uuid string) (vc db.VMChange, ok bool, cand *candidate) {
	stored := u.vms[uuid]
	if stored != nil {
		return u.listedChange(uuid, stored)
	}
	if f := u.servers[uuid]; f != nil && f.server.Setup {
		return u.computeNodeChange(uuid, f), true, nil
	}
	if gone := u.guard.unlisted[uuid]; gone != nil {
		if _, held := u.guard.state.Keeps(uuid); held && gone.vm != nil {
			// Its removal held: computed as listed (a recalled VM gets
			// its names back).
			vc, ok, c := u.listedChange(uuid, gone.vm)
			if c != nil && c.report != nil {
				u.reportRemoval(uuid, c.report) // (not the guard's: its cause is not the listing)
			}
			return vc, ok, &candidate{removal: guard.Removal{VM: uuid, Cause: guard.Unlisted, Group: gone.listing}, asHeld: true}
		}
		// (Its services hear of it on the guard's turn.)
		cand = &candidate{removal: guard.Removal{VM: uuid, Cause: guard.Unlisted, Group: gone.listing}, report: &memberReport{gone: true}}
	} else {
		u.leaveServices(uuid)
	}
	return db.VMChange{UUID: uuid, Delete: true}, u.stored(uuid), cand
}

// listedChange builds the change of a VM from its facts. A VM whose
// removal the guard holds is computed as if its cause were not so
// (asIfNot): it keeps its names, and whatever else changes for it
// applies.
func (u *Updater) listedChange(uuid string, stored *storedVM) (vc db.VMChange, ok bool, cand *candidate) {
	vm, err := stored.vm()
	if err != nil {
		u.log.Error("stored vm facts unreadable; keeping its records", "vm", uuid, "err", err)
		return db.VMChange{}, false, nil
	}
	owner := u.users[vm.OwnerUUID]
	if owner == nil {
		owner = u.logins[vm.OwnerUUID]
	}
	if owner == nil {
		u.log.Warn("owner unknown; keeping the VM's records", "vm", uuid, "owner", vm.OwnerUUID)
		return db.VMChange{}, false, nil
	}
	cnDown := false
	if f := u.servers[vm.ServerUUID]; f != nil {
		cnDown = f.down
	}
	in := records.Input{VM: vm, Owner: owner, CNDown: cnDown}
	d := records.Decide(&u.cfg, in)
	cand = candidateOf(uuid, vm.OwnerUUID, vm.ServerUUID, &d)
	report := cand // the removal the hysteresis hears of on the guard's turn
	if cause, held := u.guard.state.Keeps(uuid); held && cand != nil && cand.removal.Cause == cause {
		in = asIfNot(in, cause)
		d = records.Decide(&u.cfg, in)
		cand.asHeld, report = true, nil
	}
	res := u.computeListing(&d, in, report)
	vc = u.vmChange(uuid, newVMMeta(vm, in.Owner, in.CNDown, &res, time.Time{}), &res, clientOf(in.Owner, &res))
	if len(res.Problems) > 0 {
		u.log.Info("vm input problems", "vm", uuid, "problems", res.Problems)
	}
	// The reference updater's debug line, field for field (operators grep
	// for it): why, list services, list instance, services, records.
	u.log.Debug("updating vm", "vm", uuid, "why", res.Reasons, "l_s", res.ListServices, "l_i", res.ListInstance,
		"svcs", len(res.Services), "c", len(res.Records))
	return vc, true, cand
}

// asIfNot is the input of a VM as if cause were not so: its compute node
// up, or its owner's flags on.
func asIfNot(in records.Input, cause guard.Cause) records.Input {
	switch cause {
	case guard.CNDown:
		in.CNDown = false
	case guard.OwnerOff:
		owner := *in.Owner
		owner.TritonCNSEnabled, owner.ApprovedForProvisioning = "true", "true"
		in.Owner = &owner
	}
	return in
}

// computeNodeChange builds the change of a set-up compute node: its CMON
// names, stored under the server's UUID as the reference's fake admin VM
// was, so GET /vm/:uuid and cnsadm vm explain it too. A VM with the same
// UUID (possible only in a hand-written inventory) takes precedence.
func (u *Updater) computeNodeChange(uuid string, f *serverFacts) db.VMChange {
	res := records.ComputeNode(&u.cfg, &f.server)
	m := &VMMeta{UUID: uuid, Alias: f.server.Hostname, Server: uuid, CNDown: f.down, ComputeNode: true,
		Reasons: []string{string(records.ReasonComputeNode)}, Problems: res.Problems}
	return u.vmChange(uuid, m, &res, nil)
}

// clientOf is how a listed VM is recognised when it asks cns
// (client_answers), nil when it is not.
func clientOf(owner *dc.User, res *records.Result) *db.Client {
	if len(res.Clients) == 0 {
		return nil
	}
	c := &db.Client{Owner: strings.ToLower(owner.UUID), Addrs: make([]db.ClientAddr, 0, len(res.Clients)), Zones: res.ClientZones}
	for _, a := range res.Clients {
		c.Addrs = append(c.Addrs, db.ClientAddr{Addr: a.Addr, Fabric: a.Fabric})
	}
	return c
}

// vmChange is the change storing m (its Updated set now), res's records
// and client, hashed without the time.
func (u *Updater) vmChange(uuid string, m *VMMeta, res *records.Result, client *db.Client) db.VMChange {
	timeless, err := json.Marshal(m) // what the hash covers: the decision, not when it was made
	if err != nil {
		timeless = nil
	}
	h := newChangeHasher(timeless)
	var sum uint64
	stored, restored := u.hashes[uuid]
	if restored {
		// Most VMs a reconcile recomputes (a restart, a config change)
		// come out as stored: hash first, and prepare only a change.
		// Preparing costs several times the hash's packing (100k VMs:
		// 3.4 of the 7.8 s spent in change).
		for _, r := range res.Records {
			rec := storedRecord(r)
			h.record(&rec, nil)
		}
		if sum = h.sum(client); sum == stored {
			return db.VMChange{UUID: uuid, Hash: sum}
		}
	}
	m.Updated = u.now().UTC()
	vc := db.VMChange{UUID: uuid, Meta: m.Encode(), Records: make([]db.Record, 0, len(res.Records)), Client: client}
	for _, r := range res.Records {
		vc.Records = append(vc.Records, storedRecord(r))
	}
	// Here, not in the commit's one writer (drain computes while it
	// commits); a new VM's records are hashed as they are packed.
	if restored {
		db.PrepareRecords(&vc, nil)
	} else {
		db.PrepareRecords(&vc, func(i int, wire []byte) { h.record(&vc.Records[i], wire) })
		sum = h.sum(client)
	}
	vc.Hash = sum
	return vc
}

// storedRecord is r as a change set carries it to the store.
func storedRecord(r records.Record) db.Record {
	return db.Record{Zone: r.Zone, RR: r.RR, Pref: r.Pref, Stamp: r.Stamp}
}

// changeHasher identifies a VM's computed state: its decision (meta
// without the time it was made) and its records in wire form. Equal
// hashes mean nothing to commit. A VM without a Client hashes as it did
// before client_answers existed, so enabling nothing rewrites nothing.
type changeHasher struct {
	h   hash.Hash64
	buf []byte
}

func newChangeHasher(meta []byte) *changeHasher {
	c := &changeHasher{h: fnv.New64a()}
	c.h.Write(meta)
	return c
}

// record adds r; wire is r.RR as dns.PackRR packs it uncompressed, nil
// when not packed yet.
func (c *changeHasher) record(r *db.Record, wire []byte) {
	h := c.h
	h.Write([]byte(r.Zone))
	h.Write([]byte{0, r.Pref})
	if r.Stamp != 0 {
		h.Write(binary.BigEndian.AppendUint64(nil, r.Stamp))
	}
	if wire != nil && len(wire) <= hashPackSize {
		h.Write(wire)
		return
	}
	if c.buf == nil {
		c.buf = make([]byte, hashPackSize)
	}
	if n, err := dns.PackRR(r.RR, c.buf, 0, nil, false); err == nil {
		h.Write(c.buf[:n])
	} else {
		h.Write([]byte(r.RR.String()))
	}
}

// hashPackSize is the buffer the hash has always packed a record in: a
// record that does not fit is hashed as text.
const hashPackSize = 512

// sum adds client and returns the hash.
func (c *changeHasher) sum(client *db.Client) uint64 {
	h := c.h
	if client != nil {
		h.Write([]byte("\x00client\x00" + client.Owner))
		for _, a := range client.Addrs {
			h.Write([]byte(a.Addr.String() + " " + a.Fabric.String()))
		}
		h.Write([]byte(strings.Join(client.Zones, " ")))
	}
	return h.Sum64() | 1 // never 0, which means "no hash"
}
