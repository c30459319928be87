package feeds

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/tritondatacenter/cns/admin/status"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/records"
)

// VMMeta is what the updater stores with each VM: the facts the decision
// came from and the decision itself, for `cnsadm vm`, GET /vm/:uuid and
// offline inspection.
type VMMeta struct {
	UUID   string `json:"uuid"`
	Alias  string `json:"alias,omitempty"`
	Owner  string `json:"owner_uuid"`
	Login  string `json:"login,omitempty"`
	Server string `json:"server_uuid,omitempty"`
	State  string `json:"state"`
	CNDown bool   `json:"cn_down,omitempty"`
	// ComputeNode marks a compute node's entry (its CMON names), not a VM.
	ComputeNode  bool      `json:"compute_node,omitempty"`
	ListInstance bool      `json:"list_instance"`
	ListServices bool      `json:"list_services"`
	Reasons      []string  `json:"reasons"`
	Services     []string  `json:"services,omitempty"`
	Problems     []string  `json:"problems,omitempty"`
	Updated      time.Time `json:"updated"`
}

func newVMMeta(vm *dc.VM, owner *dc.User, cnDown bool, res *records.Result, now time.Time) *VMMeta {
	m := &VMMeta{
		UUID: vm.UUID, Alias: vm.AliasString(), Owner: vm.OwnerUUID, Login: owner.Login,
		Server: vm.ServerUUID, State: vm.State, CNDown: cnDown,
		ListInstance: res.ListInstance, ListServices: res.ListServices,
		Reasons: make([]string, 0, len(res.Reasons)), Problems: res.Problems, Updated: now.UTC(),
	}
	for _, r := range res.Reasons {
		m.Reasons = append(m.Reasons, string(r))
	}
	for _, s := range res.Services {
		m.Services = append(m.Services, s.Name)
	}
	return m
}

// DecodeVMMeta reads the meta the updater stored for a VM: the binary
// encoding (Encode), or the JSON that stores written before it hold.
func DecodeVMMeta(b []byte) (*VMMeta, error) {
	if len(b) > 0 && b[0] == '{' {
		var m VMMeta
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		return &m, nil
	}
	return decodeVMMetaBinary(b)
}

// UpgradeVMMeta rewrites a VM's meta in the current encoding (the db's
// schema upgrade calls it for every stored VM); a meta already in it, or
// one it cannot read, comes back unchanged.
func UpgradeVMMeta(b []byte) []byte {
	if len(b) == 0 || b[0] != '{' {
		return b
	}
	m, err := DecodeVMMeta(b)
	if err != nil {
		return b
	}
	return m.Encode()
}

// FeedStatus is the health of one source of truth, kept in the form the
// admin API serves it.
type FeedStatus = status.Feed

// ReportFeed records the outcome of a feed's latest attempt: err nil is
// healthy. Degradation is logged once, on the transition.
func (u *Updater) ReportFeed(name string, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	st, ok := u.feeds[name]
	healthy := err == nil
	if !ok || st.Healthy != healthy {
		st = FeedStatus{Name: name, Healthy: healthy, Since: now, LastOK: st.LastOK}
		if healthy {
			u.log.Info("feed healthy", "feed", name)
		} else {
			u.log.Warn("feed degraded; serving what is stored", "feed", name, "err", err)
		}
	}
	if healthy {
		st.LastOK = now
		st.Reason = ""
		if c, ok := guardFeeds[name]; ok {
			u.upstreamAnswered(c)
		}
	} else {
		st.Reason = err.Error()
	}
	u.feeds[name] = st
}

// Feeds returns the health of every feed, by name.
func (u *Updater) Feeds() []FeedStatus {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]FeedStatus, 0, len(u.feeds))
	for _, k := range slices.Sorted(maps.Keys(u.feeds)) {
		out = append(out, u.feeds[k])
	}
	return out
}
