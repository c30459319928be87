package sdc

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// listPageSize is the page size of CNAPI and NAPI listings, their
// maximum. The reference sent no limit and so saw at most the first
// 1000 rows (moray's default).
const listPageSize = 1000

// CNAPI is a client of CNAPI's ListServers (sdc-apis §3).
type CNAPI struct {
	rest restClient
}

// NewCNAPI returns a client for opts (hc and timeout may be zero).
func NewCNAPI(opts APIOptions, hc *http.Client, timeout time.Duration) (*CNAPI, error) {
	rc, err := newRESTClient("cnapi", opts.Address, hc, timeout)
	if err != nil {
		return nil, err
	}
	return &CNAPI{rest: rc}, nil
}

// ListServers lists every set-up server with its status, heartbeat and
// sysinfo, as CNS asks (setup=true&extras=status,sysinfo), page by page.
func (c *CNAPI) ListServers(ctx context.Context) ([]dc.Server, error) {
	return listAll(ctx, func(offset int) ([]dc.Server, error) {
		q := url.Values{"setup": {"true"}, "extras": {"status,sysinfo"},
			"limit": {strconv.Itoa(listPageSize)}, "offset": {strconv.Itoa(offset)}}
		var page []dc.Server
		_, err := c.rest.get(ctx, "/servers", q, &page)
		return page, err
	}, func(s dc.Server) string { return s.UUID })
}

// ServerStatus asks about some servers (all set-up ones when uuids is
// nil) without sysinfo: status, last_heartbeat, last_boot and hostname,
// what the CN-down rule reads, at a fraction of the listing's size.
func (c *CNAPI) ServerStatus(ctx context.Context, uuids []string) ([]dc.Server, error) {
	return listAll(ctx, func(offset int) ([]dc.Server, error) {
		q := url.Values{"extras": {"status"}, "limit": {strconv.Itoa(listPageSize)}, "offset": {strconv.Itoa(offset)}}
		if uuids != nil {
			q.Set("uuids", strings.Join(uuids, ","))
		} else {
			q.Set("setup", "true")
		}
		var page []dc.Server
		_, err := c.rest.get(ctx, "/servers", q, &page)
		return page, err
	}, func(s dc.Server) string { return s.UUID })
}

// listAll gathers limit/offset pages until a short one, dropping rows a
// shifting offset repeats.
func listAll[T any](ctx context.Context, page func(offset int) ([]T, error), key func(T) string) ([]T, error) {
	var out []T
	seen := map[string]bool{}
	for offset := 0; ; {
		items, err := page(offset)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if k := key(it); !seen[k] {
				seen[k] = true
				out = append(out, it)
			}
		}
		offset += len(items)
		if len(items) < listPageSize || ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
}
