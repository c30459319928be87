package sdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// VMAPI is a client of VMAPI's ListVms and GetVm (sdc-apis §1).
type VMAPI struct {
	rest  restClient
	limit int

	mu     sync.Mutex
	paging pagingMode
}

type pagingMode int

const (
	pagingUnknown pagingMode = iota
	pagingMarker
	pagingOffset
)

// NewVMAPI returns a client for opts (hc and timeout may be zero).
func NewVMAPI(opts VMAPIOptions, hc *http.Client, timeout time.Duration) (*VMAPI, error) {
	rc, err := newRESTClient("vmapi", opts.Address, hc, timeout)
	if err != nil {
		return nil, err
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = DefaultVMAPILimit
	}
	return &VMAPI{rest: rc, limit: min(limit, MaxVMAPILimit)}, nil
}

// VMFilter selects VMs in ListVMs. State "active" is VMAPI's "neither
// destroyed nor failed".
type VMFilter struct {
	State      string
	OwnerUUID  string
	ServerUUID string
	UUID       string
}

func (f VMFilter) values() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"state": f.State, "owner_uuid": f.OwnerUUID, "server_uuid": f.ServerUUID, "uuid": f.UUID} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// Page is one ListVms answer.
type Page struct {
	VMs []dc.VM
	// Total is x-joyent-resource-count, the number of matches ignoring
	// paging, or -1 when VMAPI did not send it.
	Total int
}

// ListVMs fetches one page: limit VMs (or limit+1, when the marker VM
// has left the set) after marker, a VM uuid, in VMAPI's uuid DESC order;
// with offset >= 0 instead of a marker, offset paging (old VMAPIs).
func (c *VMAPI) ListVMs(ctx context.Context, f VMFilter, limit int, marker string, offset int) (Page, error) {
	q := f.values()
	q.Set("limit", strconv.Itoa(limit))
	switch {
	case marker != "":
		m, _ := json.Marshal(map[string]string{"uuid": marker})
		q.Set("marker", string(m))
	case offset > 0:
		q.Set("offset", strconv.Itoa(offset))
	}
	var page Page
	h, err := c.rest.do(ctx, "/vms", q, func(body io.Reader) error {
		var wire []dc.WireVM
		if err := json.NewDecoder(body).Decode(&wire); err != nil {
			return err
		}
		page.VMs = make([]dc.VM, 0, len(wire))
		for i := range wire {
			vm, err := wire[i].Checked()
			if err != nil {
				return fmt.Errorf("vms[%d]: %w", i, err)
			}
			page.VMs = append(page.VMs, vm)
		}
		return nil
	})
	if err != nil {
		return Page{}, err
	}
	page.Total = -1
	if n, err := strconv.Atoi(h.Get("x-joyent-resource-count")); err == nil {
		page.Total = n
	}
	return page, nil
}

// ProbeMarker asks VMAPI whether it pages by marker, as CNS does: a marker
// below every uuid must give an empty page. A 409 (marker is an unknown
// parameter) or a non-empty page means offset paging. The answer is
// remembered for the listings.
func (c *VMAPI) ProbeMarker(ctx context.Context) (bool, error) {
	page, err := c.ListVMs(ctx, VMFilter{State: "active"}, 1, "000000", 0)
	var ae *APIError
	marker := false
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusConflict:
	case err != nil:
		return false, err
	default:
		marker = len(page.VMs) == 0
	}
	c.mu.Lock()
	c.paging = pagingOffset
	if marker {
		c.paging = pagingMarker
	}
	c.mu.Unlock()
	return marker, nil
}

// ErrIncompleteListing means a full listing could not be trusted to hold
// every VM, so it must not be applied as the complete truth.
var ErrIncompleteListing = errors.New("vmapi: listing incomplete")

// ListAllVMs lists every VM matching f (ListVMPages), into one slice: a
// compute node's VMs, say.
func (c *VMAPI) ListAllVMs(ctx context.Context, f VMFilter) ([]dc.VM, error) {
	var out []dc.VM
	err := c.ListVMPages(ctx, f, func() func([]dc.VM) error {
		out = out[:0]
		return func(page []dc.VM) error {
			out = append(out, page...)
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListVMPages lists every VM matching f, page by page, and hands each page
// to the function attempt returns as it comes, so that a listing of a
// million VMs is not held decoded. It fails rather than list part of the
// VMs: any page failing fails the listing, and so does a listing that
// ends far short of the count VMAPI reported (pages that silently come
// back empty), or, with offset paging, a count that moved during the
// listing (rows shift, so some may have been skipped). attempt is called
// before each attempt's first page: with offset paging a listing whose
// count moved is made again, up to three times, and what the attempt
// before handed on is to be dropped; so is what a failed listing handed
// on.
func (c *VMAPI) ListVMPages(ctx context.Context, f VMFilter, attempt func() func([]dc.VM) error) error {
	c.mu.Lock()
	mode := c.paging
	c.mu.Unlock()
	if mode == pagingUnknown {
		marker, err := c.ProbeMarker(ctx)
		if err != nil {
			return err
		}
		mode = pagingOffset
		if marker {
			mode = pagingMarker
		}
	}
	if mode == pagingMarker {
		return c.listByMarker(ctx, f, attempt())
	}
	var err error
	for range 3 {
		if err = c.listByOffset(ctx, f, attempt()); !errors.Is(err, ErrIncompleteListing) {
			return err
		}
	}
	return err
}

func (c *VMAPI) listByMarker(ctx context.Context, f VMFilter, each func([]dc.VM) error) error {
	marker := ""
	total, listed := -1, 0
	for {
		page, err := c.ListVMs(ctx, f, c.limit, marker, 0)
		if err != nil {
			return err
		}
		if page.Total >= 0 {
			total = page.Total
		}
		listed += len(page.VMs)
		if err := each(page.VMs); err != nil {
			return err
		}
		// A page may hold limit+1 VMs (the marker VM left the set): only
		// a short page ends the listing.
		if len(page.VMs) < c.limit {
			break
		}
		last := strings.ToLower(page.VMs[len(page.VMs)-1].UUID)
		if marker != "" && last >= marker {
			return fmt.Errorf("%w: paging did not advance past %s", ErrIncompleteListing, marker)
		}
		marker = last
	}
	return checkCount(listed, total)
}

func (c *VMAPI) listByOffset(ctx context.Context, f VMFilter, each func([]dc.VM) error) error {
	seen := map[string]bool{}
	first := -2
	total, listed := -1, 0
	for offset := 0; ; {
		page, err := c.ListVMs(ctx, f, c.limit, "", offset)
		if err != nil {
			return err
		}
		if first == -2 {
			first = page.Total
		}
		total = page.Total
		fresh := page.VMs[:0] // (rows shift: one may come twice)
		for _, vm := range page.VMs {
			if id := strings.ToLower(vm.UUID); !seen[id] {
				seen[id] = true
				fresh = append(fresh, vm)
			}
		}
		listed += len(fresh)
		if err := each(fresh); err != nil {
			return err
		}
		offset += len(page.VMs)
		if len(page.VMs) < c.limit {
			break
		}
	}
	if first != total {
		return fmt.Errorf("%w: %d VMs when the listing began, %d at its end (offset paging may have skipped some)", ErrIncompleteListing, first, total)
	}
	return checkCount(listed, total)
}

// checkCount compares what a listing gathered with the count VMAPI
// reported on its last page. VMs created during the listing may be
// missed and counted, so only a large gap is an error.
func checkCount(got, total int) error {
	if total < 0 {
		return nil
	}
	if got < total-max(10, total/10) {
		return fmt.Errorf("%w: %d VMs listed, VMAPI counts %d", ErrIncompleteListing, got, total)
	}
	return nil
}

// GetVM fetches one VM, destroyed ones included. An unknown VM is an
// error matching ErrNotFound.
func (c *VMAPI) GetVM(ctx context.Context, uuid string) (*dc.VM, error) {
	var w dc.WireVM
	if _, err := c.rest.get(ctx, "/vms/"+url.PathEscape(uuid), nil, &w); err != nil {
		return nil, err
	}
	vm, err := w.Checked()
	if err != nil {
		return nil, fmt.Errorf("vmapi GET /vms/%s: %w", uuid, err)
	}
	if !strings.EqualFold(vm.UUID, uuid) {
		return nil, fmt.Errorf("vmapi GET /vms/%s: answered VM %q", uuid, vm.UUID)
	}
	return &vm, nil
}
