package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to a cns API. cnsadm and the TUI use it.
type Client struct {
	// Base is the API's URL, e.g. "http://127.0.0.1:5380".
	Base  string
	Token string
	HTTP  *http.Client
}

// NewClient returns a client for base ("host:port" or a URL).
func NewClient(base, token string) *Client {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{Base: strings.TrimSuffix(base, "/"), Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// do sends a request and decodes a JSON answer into out (when not nil).
// okStatus lists the statuses whose body decodes into out.
func (c *Client) do(ctx context.Context, method, path string, body, out any, okStatus ...int) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, fmt.Errorf("cns API at %s: %w", c.Base, err)
	}
	defer resp.Body.Close()
	if len(okStatus) == 0 {
		okStatus = []int{http.StatusOK}
	}
	for _, s := range okStatus {
		if resp.StatusCode == s {
			if out == nil {
				_, err := io.Copy(io.Discard, resp.Body)
				return resp.StatusCode, err
			}
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				return resp.StatusCode, fmt.Errorf("%s %s: bad answer: %w", method, path, err)
			}
			return resp.StatusCode, nil
		}
	}
	var e Error
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(data, &e) != nil || e.Code == "" {
		e = Error{Code: resp.Status, Message: strings.TrimSpace(string(data))}
	}
	e.Status = resp.StatusCode
	return resp.StatusCode, &e
}

// IsNotFound reports whether err is the API's 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

func (c *Client) Ping(ctx context.Context) error {
	_, err := c.do(ctx, "GET", "/ping", nil, nil)
	return err
}

func (c *Client) VM(ctx context.Context, uuid string) (*VM, error) {
	var v VM
	_, err := c.do(ctx, "GET", "/vm/"+url.PathEscape(uuid), nil, &v)
	return &v, err
}

// SearchVMs returns up to limit stored VMs whose UUID, alias, owner or
// login contains q, or that have the address q (limit 0: the server's
// default).
func (c *Client) SearchVMs(ctx context.Context, q string, limit int) (*VMSearch, error) {
	v := url.Values{"q": {q}}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var res VMSearch
	_, err := c.do(ctx, "GET", "/vms?"+v.Encode(), nil, &res)
	return &res, err
}

func (c *Client) Peers(ctx context.Context) ([]PeerSummary, error) {
	var v []PeerSummary
	_, err := c.do(ctx, "GET", "/peers", nil, &v)
	return v, err
}

func (c *Client) Peer(ctx context.Context, addr string) (*Peer, error) {
	var v Peer
	_, err := c.do(ctx, "GET", "/peer/"+url.PathEscape(addr), nil, &v)
	return &v, err
}

func (c *Client) DeletePeer(ctx context.Context, addr string) error {
	_, err := c.do(ctx, "DELETE", "/peer/"+url.PathEscape(addr), nil, nil)
	return err
}

func (c *Client) Zones(ctx context.Context) ([]ZoneSummary, error) {
	var v []ZoneSummary
	_, err := c.do(ctx, "GET", "/zones", nil, &v)
	return v, err
}

func (c *Client) Zone(ctx context.Context, zone string) (*Zone, error) {
	var v Zone
	_, err := c.do(ctx, "GET", "/zones/"+url.PathEscape(zone), nil, &v)
	return &v, err
}

// Records returns the records at name in zone, or a page of the zone from
// after when name is "".
func (c *Client) Records(ctx context.Context, zone, name, after string, limit int) (*Records, error) {
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var v Records
	_, err := c.do(ctx, "GET", "/zones/"+url.PathEscape(zone)+"/records?"+q.Encode(), nil, &v)
	return &v, err
}

func (c *Client) History(ctx context.Context, zone string, since uint32, limit int) ([]Change, error) {
	q := url.Values{}
	if since != 0 {
		q.Set("since", strconv.FormatUint(uint64(since), 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var v []Change
	_, err := c.do(ctx, "GET", "/zones/"+url.PathEscape(zone)+"/history?"+q.Encode(), nil, &v)
	return v, err
}

func (c *Client) AllowedPeers(ctx context.Context) ([]AllowedPeer, error) {
	var v []AllowedPeer
	_, err := c.do(ctx, "GET", "/allowed-peers", nil, &v)
	return v, err
}

func (c *Client) SuffixesForVM(ctx context.Context, owner string, networks []string) ([]string, error) {
	var v Suffixes
	_, err := c.do(ctx, "POST", "/suffixes-for-vm", SuffixesRequest{OwnerUUID: owner, Networks: networks}, &v)
	return v.Suffixes, err
}

func (c *Client) Feeds(ctx context.Context) (*Feeds, error) {
	var v Feeds
	_, err := c.do(ctx, "GET", "/feeds", nil, &v)
	return &v, err
}

// AcceptRemovals applies the removals the guard holds for cause (every
// cause when empty) and returns how many VMs that lets go.
func (c *Client) AcceptRemovals(ctx context.Context, cause string) (int, error) {
	var v RemovalsAccepted
	_, err := c.do(ctx, "POST", "/feeds/accept", AcceptRemovals{Cause: cause}, &v)
	return v.Applied, err
}

func (c *Client) Status(ctx context.Context) (*Status, error) {
	var v Status
	_, err := c.do(ctx, "GET", "/status", nil, &v)
	return &v, err
}

// Wait long-polls until every peer of zone serves serial (0: the current
// one) or timeout passes; done says which.
func (c *Client) Wait(ctx context.Context, zone string, serial uint32, timeout time.Duration) (*Wait, error) {
	q := url.Values{"zone": {zone}, "timeout": {strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64)}}
	if serial != 0 {
		q.Set("serial", strconv.FormatUint(uint64(serial), 10))
	}
	var v Wait
	hc := *c.HTTP
	hc.Timeout = timeout + 10*time.Second
	cc := *c
	cc.HTTP = &hc
	_, err := cc.do(ctx, "GET", "/wait?"+q.Encode(), nil, &v, http.StatusOK, http.StatusRequestTimeout)
	return &v, err
}

// Reload asks the server to re-read its configuration.
func (c *Client) Reload(ctx context.Context) error {
	_, err := c.do(ctx, "POST", "/config/reload", nil, nil)
	return err
}

// Backup streams a consistent copy of the db into w.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.Base+"/db/backup", nil)
	if err != nil {
		return 0, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := *c.HTTP
	hc.Timeout = 0 // a big db takes what it takes
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e Error
		json.NewDecoder(resp.Body).Decode(&e)
		e.Status = resp.StatusCode
		return 0, &e
	}
	return io.Copy(w, resp.Body)
}

// Metrics returns the Prometheus text.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.Base+"/metrics", nil)
	if err != nil {
		return "", err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// Services lists the services' hysteresis state (pendingOnly: only those
// with members waiting to leave).
func (c *Client) Services(ctx context.Context, pendingOnly bool) ([]Service, error) {
	var v []Service
	path := "/services"
	if pendingOnly {
		path += "?pending=true"
	}
	_, err := c.do(ctx, "GET", path, nil, &v)
	return v, err
}

// Service returns one service's hysteresis state.
func (c *Client) Service(ctx context.Context, owner, name string) (*Service, error) {
	var v Service
	_, err := c.do(ctx, "GET", "/services/"+url.PathEscape(owner)+"/"+url.PathEscape(name), nil, &v)
	return &v, err
}
