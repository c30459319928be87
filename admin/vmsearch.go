package admin

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
)

// Searching the stored VMs: GET /vms, the TUI's VM view (live and
// offline).

// DefaultVMSearchLimit and MaxVMSearchLimit bound a search's answer.
const (
	DefaultVMSearchLimit = 50
	MaxVMSearchLimit     = 1000
)

// SearchVMs returns up to limit stored VMs, in UUID order, matching q:
// every VM when q is empty; when q is an IP address, the VMs with an A or
// AAAA record of it (which reads each VM's records: slower on a big db);
// otherwise the VMs whose UUID, alias, owner UUID or owner login contains
// q, ignoring case. It stops early when ctx ends.
func SearchVMs(ctx context.Context, store *db.DB, q string, limit int) (VMSearch, error) {
	q = strings.TrimSpace(q)
	out := VMSearch{Query: q, VMs: []VMSummary{}}
	if limit <= 0 {
		limit = DefaultVMSearchLimit
	}
	limit = min(limit, MaxVMSearchLimit)
	if ip, err := netip.ParseAddr(q); err == nil {
		return searchIP(ctx, store, ip.Unmap(), limit, out)
	}
	lq := strings.ToLower(q)
	err := store.EachVM(func(uuid string, meta []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, err := feeds.DecodeVMMeta(meta)
		if err != nil {
			m = &feeds.VMMeta{UUID: uuid}
		}
		if lq != "" && !strings.Contains(uuid, lq) && !strings.Contains(strings.ToLower(m.Alias), lq) &&
			!strings.Contains(m.Owner, lq) && !strings.Contains(strings.ToLower(m.Login), lq) {
			return nil
		}
		if len(out.VMs) == limit {
			out.Truncated = true
			return errStopSearch
		}
		out.VMs = append(out.VMs, vmSummary(uuid, m))
		return nil
	})
	if errors.Is(err, errStopSearch) {
		err = nil
	}
	return out, err
}

var errStopSearch = errors.New("search: limit reached")

// searchIP finds the VMs with an address record of ip. The UUIDs are
// collected first: a VM's records are read in a transaction of their own,
// never nested in the scan's.
func searchIP(ctx context.Context, store *db.DB, ip netip.Addr, limit int, out VMSearch) (VMSearch, error) {
	var uuids []string
	if err := store.EachVM(func(uuid string, _ []byte) error {
		uuids = append(uuids, uuid)
		return nil
	}); err != nil {
		return out, err
	}
	for _, uuid := range uuids {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		vm, ok, err := store.VM(uuid)
		if err != nil {
			return out, err
		}
		if !ok || !hasAddress(vm, ip) {
			continue
		}
		if len(out.VMs) == limit {
			out.Truncated = true
			break
		}
		m, err := feeds.DecodeVMMeta(vm.Meta)
		if err != nil {
			m = &feeds.VMMeta{UUID: uuid}
		}
		out.VMs = append(out.VMs, vmSummary(uuid, m))
	}
	return out, nil
}

func hasAddress(vm db.VM, ip netip.Addr) bool {
	for _, rec := range vm.Records {
		for _, rr := range rec.RRs {
			var a netip.Addr
			switch r := rr.(type) {
			case *dns.A:
				a, _ = netip.AddrFromSlice(r.A.To4())
			case *dns.AAAA:
				a, _ = netip.AddrFromSlice(r.AAAA)
			}
			if a.IsValid() && a.Unmap() == ip {
				return true
			}
		}
	}
	return false
}

// getVMs is GET /vms?q=&limit=.
func (s *Server) getVMs(w http.ResponseWriter, r *http.Request) error {
	limit, err := intParam(r, "limit", DefaultVMSearchLimit)
	if err != nil {
		return err
	}
	if limit == 0 || limit > MaxVMSearchLimit {
		return badRequest("limit=%d: give 1 to %d", limit, MaxVMSearchLimit)
	}
	res, err := SearchVMs(r.Context(), s.Store, r.URL.Query().Get("q"), limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}
