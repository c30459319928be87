package feeds

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// overtakes versions the model's inputs so that a change that comes while
// a listing is being made is not undone by the listing's older copy of its
// VM (dc.Sink): every change and every listing's start takes the next
// number of seq, and while a listing begun is not applied yet, the last
// change of each VM since is remembered. The listing is then applied
// around them (SetInventory): a VM a change set after the listing began
// keeps that state unless the listing's copy was modified later, and one
// a change removed stays removed.
type overtakes struct {
	seq     uint64
	begun   uint64               // the start of the last listing begun
	applied uint64               // the start of the last listing applied
	vms     map[string]overtaken // by uuid, while a listing begun is not applied
}

// overtaken is the last change of a VM after a listing began.
type overtaken struct {
	seq      uint64
	modified int64 // the VM's last_modified as the change gave it (modifiedAt)
	removed  bool
}

// begin starts a listing and returns its start. A feed lists one at a
// time: the changes remembered for a listing begun before, which failed,
// are older than this one's start and go (a VMAPI down for hours does
// not grow them).
func (o *overtakes) begin() uint64 {
	o.seq++
	o.begun = o.seq
	o.vms = nil
	return o.seq
}

// changed records a change of VM uuid (removed: it is gone), last
// modified at modified.
func (o *overtakes) changed(uuid string, modified int64, removed bool) {
	o.seq++
	if o.begun <= o.applied {
		return // no listing in the making: nothing to overtake
	}
	if o.vms == nil {
		o.vms = map[string]overtaken{}
	}
	o.vms[uuid] = overtaken{seq: o.seq, modified: modified, removed: removed}
}

// of returns the last change of VM uuid after start, the start of a
// listing being applied (0: none overtakes it).
func (o *overtakes) of(uuid string, start uint64) (overtaken, bool) {
	if start == 0 {
		return overtaken{}, false
	}
	c, ok := o.vms[uuid]
	return c, ok && c.seq > start
}

// done forgets what the listing begun at start, now applied, needed: the
// changes before the listing begun last are older than all it lists.
func (o *overtakes) done(start uint64) {
	o.applied = max(o.applied, start)
	if o.begun <= o.applied {
		o.vms = nil
		return
	}
	for id, c := range o.vms {
		if c.seq <= o.begun {
			delete(o.vms, id)
		}
	}
}

// keeps reports whether a listing's copy of a VM, last modified at
// listed, gives way to c: a removal, or a state no older (or either time
// unknown).
func (c overtaken) keeps(listed int64) bool {
	return c.removed || listed == modifiedUnknown || c.modified == modifiedUnknown || listed <= c.modified
}

// modifiedUnknown is modifiedAt of a time that does not parse.
const modifiedUnknown = math.MinInt64

// modifiedAt returns a VM's last_modified (RFC 3339) in Unix nanoseconds,
// or modifiedUnknown: a listing holds it for every VM.
func modifiedAt(lastModified string) int64 {
	t, err := time.Parse(time.RFC3339Nano, lastModified)
	if err != nil || t.Year() < 1678 || t.Year() > 2261 { // (beyond what int64 nanoseconds hold)
		return modifiedUnknown
	}
	return t.UnixNano()
}

// ownersKept returns users, the accounts a listing begun at start names,
// with those of the model that own a VM a change brought since: the
// listing did not see that VM, and its owner stays known with it.
func (u *Updater) ownersKept(users []dc.User, start uint64) []dc.User {
	named := make(map[string]bool, len(users))
	for _, usr := range users {
		named[strings.ToLower(usr.UUID)] = true
	}
	for id := range u.overtakes.vms {
		c, _ := u.overtakes.of(id, start)
		v := u.vms[id]
		if c.seq == 0 || c.removed || v == nil || named[v.owner] {
			continue
		}
		if usr := u.users[v.owner]; usr != nil {
			named[v.owner] = true
			users = append(slices.Clip(users), *usr)
		}
	}
	return users
}
