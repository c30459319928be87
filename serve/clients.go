package serve

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"slices"
	"strings"

	"github.com/tritondatacenter/cns/db"
)

// Client-scoped answers (client_answers): a query whose source address
// identifies exactly one instance gets owner-less names answered in that
// instance's owner's scope. <svc>.svc.<zone> answers what
// <svc>.svc.<owner>.<zone> answers, <name>.inst.<zone> what
// <name>.inst.<owner>.<zone> answers, and self.inst.<zone> is the caller's
// own <uuid>.inst.<owner>.<zone>. The owner-less name is only tried when
// the name itself does not exist, so every name that exists answers as it
// always did, for everyone; the answers are built from the snapshot, never
// stored, and are no part of any transfer.

// clientShards splits the index so that a commit copies only the shards
// holding the addresses it changed.
const clientShards = 64

// clientIndex maps a source address to the instances that claim it. It is
// immutable: a commit builds a new one sharing the untouched shards.
type clientIndex struct {
	shards [clientShards]map[netip.Addr]clientSlot
	addrs  int // addresses with at least one claim
}

// clientSlot holds the claims of one address: almost always one, kept
// inline (96 bytes per instance at 100k, BenchmarkClientIndexMemory).
type clientSlot struct {
	first clientClaim
	more  *[]clientClaim // nil, or the other claims: a pointer keeps the slot small
}

// claims returns every claim of the slot.
func (sl *clientSlot) claims() []clientClaim {
	all := []clientClaim{sl.first}
	if sl.more != nil {
		all = append(all, *sl.more...)
	}
	return all
}

// setClaims makes all (one or more claims) the slot's claims.
func (sl *clientSlot) setClaims(all []clientClaim) {
	sl.first, sl.more = all[0], nil
	if len(all) > 1 {
		more := slices.Clone(all[1:])
		sl.more = &more
	}
}

// clientClaim is one instance that has an address.
type clientClaim struct {
	vm    [16]byte
	scope *clientScope
	// fabricBits, when not negative, says the address is on a fabric of
	// that prefix length: the claim counts only for queries that reached
	// cns on an address of its own inside that subnet.
	fabricBits int8
}

// clientScope is an owner and the zones its instance has names in; the
// many instances with the same ones share one.
type clientScope struct {
	owner string   // lower-case owner UUID: the owner label of its names
	zones []string // the zones where the scope applies
}

func clientShard(a netip.Addr) int {
	b := a.As16()
	return int(b[15]^b[14]^b[13]) % clientShards
}

// newClientIndex reads every stored Client.
func newClientIndex(store *db.DB) (*clientIndex, error) {
	ix := &clientIndex{}
	for i := range ix.shards {
		ix.shards[i] = map[netip.Addr]clientSlot{}
	}
	in := interner{}
	err := store.Clients(func(vm string, c db.Client) error {
		ix.add(vm, &c, in)
		return nil
	})
	return ix, err
}

// apply returns the index after a commit's client changes.
func (ix *clientIndex) apply(updates []db.ClientUpdate) *clientIndex {
	next := *ix
	var copied [clientShards]bool
	own := func(a netip.Addr) {
		i := clientShard(a)
		if !copied[i] {
			m := make(map[netip.Addr]clientSlot, len(ix.shards[i])+1)
			for k, v := range ix.shards[i] {
				m[k] = v
			}
			next.shards[i], copied[i] = m, true
		}
	}
	in := interner{}
	for _, u := range updates {
		if u.Old != nil {
			for _, a := range u.Old.Addrs {
				own(a.Addr)
			}
			next.remove(u.VM, u.Old)
		}
		if u.New != nil {
			for _, a := range u.New.Addrs {
				own(a.Addr)
			}
			next.add(u.VM, u.New, in)
		}
	}
	return &next
}

func vmID(uuid string) (id [16]byte) {
	h := make([]byte, 0, 32)
	for i := 0; i < len(uuid); i++ {
		if uuid[i] != '-' {
			h = append(h, uuid[i])
		}
	}
	hex.Decode(id[:], h)
	return id
}

// interner shares the scopes of the claims it adds: thousands of
// instances have one owner and the same zones.
type interner map[string]*clientScope

func (in interner) scope(c *db.Client) *clientScope {
	key := c.Owner + "\x00" + strings.Join(c.Zones, "\x00")
	if sc, ok := in[key]; ok {
		return sc
	}
	sc := &clientScope{owner: c.Owner, zones: slices.Clip(slices.Clone(c.Zones))}
	in[key] = sc
	return sc
}

func (ix *clientIndex) add(vm string, c *db.Client, in interner) {
	sc := in.scope(c)
	id := vmID(vm)
	for _, a := range c.Addrs {
		cl := clientClaim{vm: id, scope: sc, fabricBits: -1}
		if a.Fabric.IsValid() {
			cl.fabricBits = int8(a.Fabric.Bits())
		}
		addr := a.Addr.Unmap()
		m := ix.shards[clientShard(addr)]
		slot, ok := m[addr]
		if !ok {
			slot.first = cl
			ix.addrs++
		} else {
			slot.setClaims(append(slot.claims(), cl))
		}
		m[addr] = slot
	}
}

func (ix *clientIndex) remove(vm string, c *db.Client) {
	id := vmID(vm)
	for _, a := range c.Addrs {
		addr := a.Addr.Unmap()
		m := ix.shards[clientShard(addr)]
		slot, ok := m[addr]
		if !ok {
			continue
		}
		all := slot.claims()
		for i, cl := range all {
			if cl.vm == id {
				all = append(all[:i], all[i+1:]...)
				break
			}
		}
		if len(all) == 0 {
			delete(m, addr)
			ix.addrs--
			continue
		}
		slot.setClaims(all)
		m[addr] = slot
	}
}

// callerStatus says whether a query's source identifies an instance.
type callerStatus uint8

const (
	callerUnknown   callerStatus = iota // no instance has the address
	callerAmbiguous                     // several have it
	callerFound
)

// caller returns the one instance that the source address src identifies
// for a query that reached cns at local.
func (ix *clientIndex) caller(src, local netip.Addr) (clientClaim, callerStatus) {
	src = src.Unmap()
	slot, ok := ix.shards[clientShard(src)][src]
	if !ok {
		return clientClaim{}, callerUnknown
	}
	var found clientClaim
	var more []clientClaim
	if slot.more != nil {
		more = *slot.more
	}
	n := 0
	for i := -1; i < len(more); i++ {
		cl := slot.first
		if i >= 0 {
			cl = more[i]
		}
		if cl.fabricBits >= 0 && !onFabric(src, local, int(cl.fabricBits)) {
			continue
		}
		if n == 0 || found.vm != cl.vm {
			n++
		}
		found = cl
	}
	switch {
	case n == 0:
		return clientClaim{}, callerUnknown
	case n > 1:
		return clientClaim{}, callerAmbiguous
	}
	return found, callerFound
}

// onFabric reports whether local, the address a query reached cns at, is
// inside the fabric subnet (of bits) that src is on: cns listens on that
// very fabric, so src can only be that fabric's instance.
func onFabric(src, local netip.Addr, bits int) bool {
	local = local.Unmap()
	if !local.IsValid() || local.IsUnspecified() || local.Is4() != src.Is4() {
		return false
	}
	p, err := src.Prefix(bits)
	return err == nil && p.Contains(local)
}

// Labels of the owner-less forms.
var (
	labelSvc  = []byte("\x03svc")
	labelInst = []byte("\x04inst")
	labelSelf = []byte("\x04self")
)

// ownerless reports whether the lower-case wire name, whose zone apex
// starts at zoff, has an owner-less form: one or more labels, then "svc"
// or "inst" right above the apex. kindOff is where that label starts.
func ownerless(name []byte, zoff int) (kindOff int, ok bool) {
	prev, off := -1, 0
	for off < zoff {
		prev, off = off, off+int(name[off])+1
	}
	if prev <= 0 || off != zoff {
		return 0, false
	}
	kind := name[prev:zoff]
	if !bytes.Equal(kind, labelSvc) && !bytes.Equal(kind, labelInst) {
		return 0, false
	}
	return prev, true
}

// scopedName writes into buf the name that the owner-less name means for
// cl: the owner label inserted above the kind label, and "self" right
// below "inst" replaced by the caller's UUID. ok is false when the result
// is no valid name.
func scopedName(buf *[maxNameLen]byte, name []byte, kindOff, zoff int, cl *clientClaim) ([]byte, bool) {
	b := buf[:0]
	prefix := name[:kindOff]
	last := 0 // the label right below the kind label
	for off := 0; off < kindOff; off += int(name[off]) + 1 {
		last = off
	}
	if bytes.Equal(name[kindOff:zoff], labelInst) && bytes.Equal(prefix[last:], labelSelf) {
		b = append(b, prefix[:last]...)
		b = appendUUIDLabel(b, cl.vm)
	} else {
		b = append(b, prefix...)
	}
	b = append(b, name[kindOff:zoff]...)
	owner := cl.scope.owner
	if len(owner) > 63 || len(b)+1+len(owner)+len(name)-zoff > maxNameLen {
		return nil, false
	}
	b = append(b, byte(len(owner)))
	b = append(b, owner...)
	b = append(b, name[zoff:]...)
	return b, true
}

// appendUUIDLabel appends the UUID as a lower-case label, without
// allocating.
func appendUUIDLabel(b []byte, id [16]byte) []byte {
	const digits = "0123456789abcdef"
	b = append(b, 36)
	for i, x := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, digits[x>>4], digits[x&15])
	}
	return b
}
