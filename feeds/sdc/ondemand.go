package sdc

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// The feed answers, on demand, questions about what it has not listed:
// POST /suffixes-for-vm asks about the account of a VM not yet created (a
// new account's first VM, or an account whose VMs were all destroyed),
// and about networks and pools no VM uses yet. The reference looked both
// up for every request (lib/api-server.js: UfdsFilter, a 5-minute cache;
// NetworkInfoFilter, GET /networks/:uuid, a 1-minute cache; GET
// /network_pools each time); cns does too, through lookups, which keeps
// UFDS and NAPI from more than a few such requests at once.
const (
	accountTTL     = 5 * time.Minute // the reference's UfdsFilter cache
	networkTTL     = time.Minute     // the reference's NetworkInfoFilter cache
	lookupsKept    = 4096            // answers kept, per kind
	lookupsAtOnce  = ufdsConns       // fetches in progress, per kind
	maxAccountName = 256             // longer is no uuid or login: not sent to UFDS
)

// onDemand holds the answers of Account and Network.
type onDemand struct {
	accounts *lookups[dc.User]
	networks *lookups[*dc.NetworkPool]
}

func newOnDemand(now func() time.Time) *onDemand {
	return &onDemand{
		accounts: newLookups[dc.User](accountTTL, lookupsKept, lookupsAtOnce, now),
		networks: newLookups[*dc.NetworkPool](networkTTL, lookupsKept, lookupsAtOnce, now),
	}
}

// Account looks an account up in UFDS by uuid or login, as the reference
// does for each suffixes request: base "ou=users, o=smartdc", scope one,
// (|(uuid=X)(login=X)), X escaped (RFC 4515). found is false when UFDS
// has no such account; err is set when UFDS could not say (down, or more
// than one account matched).
func (f *Feed) Account(ctx context.Context, uuidOrLogin string) (usr dc.User, found bool, err error) {
	if uuidOrLogin == "" || len(uuidOrLogin) > maxAccountName {
		return dc.User{}, false, nil
	}
	key := uuidOrLogin
	if dc.IsUUID(key) {
		key = strings.ToLower(key)
	}
	return f.lookups.accounts.get(ctx, key, f.cfg.RequestTimeout, func(ctx context.Context) (dc.User, bool, error) {
		u, err := f.ufds.GetUser(ctx, key)
		switch {
		case err == nil:
			return *u, true, nil
		case errors.Is(err, ErrNotFound):
			return dc.User{}, false, nil
		}
		f.log.Warn("UFDS lookup of an account for the API failed", "account", key, "err", err)
		return dc.User{}, false, err
	})
}

// Network looks a network or network pool up in NAPI by uuid: GET
// /networks/:uuid, then GET /network_pools/:uuid. pool is nil for a
// network and the pool (its networks in NAPI's order) for a pool; found
// is false when NAPI has neither.
func (f *Feed) Network(ctx context.Context, uuid string) (pool *dc.NetworkPool, found bool, err error) {
	uuid = strings.ToLower(uuid)
	if !dc.IsUUID(uuid) {
		return nil, false, nil
	}
	return f.lookups.networks.get(ctx, uuid, f.cfg.RequestTimeout, func(ctx context.Context) (*dc.NetworkPool, bool, error) {
		_, err := f.napi.GetNetwork(ctx, uuid)
		if err == nil {
			return nil, true, nil
		}
		if errors.Is(err, ErrNotFound) {
			var p *dc.NetworkPool
			if p, err = f.napi.GetNetworkPool(ctx, uuid); err == nil {
				return p, true, nil
			}
			if errors.Is(err, ErrNotFound) {
				return nil, false, nil
			}
		}
		f.log.Warn("NAPI lookup of a network for the API failed", "network", uuid, "err", err)
		return nil, false, err
	})
}
