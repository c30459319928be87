package admin

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// Directory looks up, on demand, what the feed has not listed: the SDC
// feed asks UFDS and NAPI (feeds/sdc.Feed). Without one (the inventory
// file feed), only what the model holds is known.
type Directory interface {
	// Account finds an account by UUID or login; found is false when
	// there is none, err set when the directory could not say.
	Account(ctx context.Context, uuidOrLogin string) (usr dc.User, found bool, err error)
	// Network finds a network (pool nil) or a network pool by UUID.
	Network(ctx context.Context, uuid string) (pool *dc.NetworkPool, found bool, err error)
}

// The reference's answers when an owner or a network cannot be had
// (lib/api-server.js): 500 with these messages, whether UFDS or NAPI has
// no such thing or could not be asked. CloudAPI fails the provisioning on
// either (lib/machines.js: "Unable to contact the Triton CNS API"); a 404
// would make it provision without a DNS domain.
const (
	msgNoOwner    = "Failed to retrieve owner from UFDS"
	msgNoNetworks = "Failed to retrieve information about networks from NAPI"
)

// maxSuffixNetworks bounds the networks of one request: a VM has a few
// NICs, and each unknown one may be a NAPI request.
const maxSuffixNetworks = 64

// postSuffixes answers CloudAPI's and sdc-docker's question before they
// provision a VM: the DNS suffixes its owner and networks give it. An
// owner or network the model does not hold is looked up in the
// Directory, as the reference looks every one up.
func (s *Server) postSuffixes(w http.ResponseWriter, r *http.Request) error {
	var req SuffixesRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return badRequest("body: %v", err)
	}
	if req.OwnerUUID == "" {
		return badRequest("owner_uuid is required")
	}
	if len(req.Networks) > maxSuffixNetworks {
		return badRequest("networks: %d of them; at most %d", len(req.Networks), maxSuffixNetworks)
	}
	for i, n := range req.Networks {
		if !dc.IsUUID(n) {
			return badRequest("networks[%d]: %q is not a UUID", i, n)
		}
	}
	if s.Updater == nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: "ServiceUnavailable", Message: "no feed: owners and networks are unknown"}
	}
	owner, err := s.suffixOwner(r.Context(), req.OwnerUUID)
	if err != nil {
		return err
	}
	var pools []dc.NetworkPool
	for _, n := range req.Networks {
		if s.Updater.KnowsNetwork(n) || s.Directory == nil {
			continue
		}
		pool, found, err := s.Directory.Network(r.Context(), n)
		if err != nil || !found {
			s.Log.Warn("suffixes: network unknown to NAPI", "network", n, "err", err, "caller", r.RemoteAddr)
			return &Error{Status: http.StatusInternalServerError, Code: "InternalError", Message: msgNoNetworks}
		}
		if pool != nil {
			pools = append(pools, *pool)
		}
	}
	suffixes := s.Updater.Suffixes(owner, req.Networks, pools)
	if suffixes == nil {
		suffixes = []string{}
	}
	return writeJSON(w, http.StatusOK, Suffixes{Suffixes: suffixes})
}

// suffixOwner is the account a suffixes request names: the model's, else
// the Directory's.
func (s *Server) suffixOwner(ctx context.Context, id string) (dc.User, error) {
	if usr, ok := s.Updater.Owner(id); ok {
		return usr, nil
	}
	var err error
	if s.Directory != nil {
		var usr dc.User
		var found bool
		if usr, found, err = s.Directory.Account(ctx, id); found && err == nil {
			return usr, nil
		}
	}
	s.Log.Warn("suffixes: owner unknown", "owner", id, "err", err)
	return dc.User{}, &Error{Status: http.StatusInternalServerError, Code: "InternalError", Message: msgNoOwner}
}
