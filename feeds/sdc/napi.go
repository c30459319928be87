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

// NAPI is a client of NAPI's networks, pools and NICs (sdc-apis §4).
type NAPI struct {
	rest restClient
}

// NewNAPI returns a client for opts (hc and timeout may be zero).
func NewNAPI(opts APIOptions, hc *http.Client, timeout time.Duration) (*NAPI, error) {
	rc, err := newRESTClient("napi", opts.Address, hc, timeout)
	if err != nil {
		return nil, err
	}
	return &NAPI{rest: rc}, nil
}

// ListNetworks lists every network, page by page.
func (c *NAPI) ListNetworks(ctx context.Context) ([]dc.Network, error) {
	return listAll(ctx, func(offset int) ([]dc.Network, error) {
		var page []dc.Network
		_, err := c.rest.get(ctx, "/networks", pageQuery(offset), &page)
		return page, err
	}, func(n dc.Network) string { return strings.ToLower(n.UUID) })
}

// ListNetworkPools lists every network pool, page by page.
func (c *NAPI) ListNetworkPools(ctx context.Context) ([]dc.NetworkPool, error) {
	return listAll(ctx, func(offset int) ([]dc.NetworkPool, error) {
		var page []dc.NetworkPool
		_, err := c.rest.get(ctx, "/network_pools", pageQuery(offset), &page)
		return page, err
	}, func(p dc.NetworkPool) string { return strings.ToLower(p.UUID) })
}

// GetNetwork fetches one network; an unknown one matches ErrNotFound.
func (c *NAPI) GetNetwork(ctx context.Context, uuid string) (*dc.Network, error) {
	var n dc.Network
	if _, err := c.rest.get(ctx, "/networks/"+url.PathEscape(uuid), nil, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// GetNetworkPool fetches one network pool (GET /network_pools/:uuid); an
// unknown one matches ErrNotFound.
func (c *NAPI) GetNetworkPool(ctx context.Context, uuid string) (*dc.NetworkPool, error) {
	var p dc.NetworkPool
	if _, err := c.rest.get(ctx, "/network_pools/"+url.PathEscape(uuid), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// NIC is the part of a NAPI NIC object (GET /nics/:mac) cns reads.
type NIC struct {
	MAC           string `json:"mac"`
	IP            string `json:"ip"`
	NICTag        string `json:"nic_tag"`
	NetworkUUID   string `json:"network_uuid"`
	BelongsToUUID string `json:"belongs_to_uuid"`
	BelongsToType string `json:"belongs_to_type"`
}

// GetNIC fetches the NIC with a MAC, given as 12 hex digits without
// colons (older NAPIs take only that form); an unknown one matches
// ErrNotFound.
func (c *NAPI) GetNIC(ctx context.Context, mac string) (*NIC, error) {
	var n NIC
	if _, err := c.rest.get(ctx, "/nics/"+url.PathEscape(mac), nil, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

func pageQuery(offset int) url.Values {
	return url.Values{"limit": {strconv.Itoa(listPageSize)}, "offset": {strconv.Itoa(offset)}}
}
