package sdc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultRequestTimeout bounds one HTTP request to an SDC API. The
// reference waited 30 s for CNAPI (TRITON-1024) and forever for VMAPI
// pages; a 1000-VM page takes well under a second.
const DefaultRequestTimeout = 30 * time.Second

// ErrNotFound is what errors.Is finds in a 404 answer.
var ErrNotFound = errors.New("not found")

// APIError is an error answer of an SDC API: restify's body {code,
// message, errors}, or the status alone when the body is not that.
type APIError struct {
	Service string // vmapi, cnapi, napi
	Path    string
	Status  int
	Code    string
	Message string
	Errors  []FieldError
}

// FieldError is one entry of a restify validation error's "errors".
type FieldError struct {
	Field   string `json:"field"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("%s GET %s: %d", e.Service, e.Path, e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	for _, f := range e.Errors {
		s += fmt.Sprintf(" [%s: %s]", f.Field, f.Message)
	}
	return s
}

// Is makes errors.Is(err, ErrNotFound) true for a 404.
func (e *APIError) Is(target error) bool {
	return target == ErrNotFound && e.Status == http.StatusNotFound
}

// restClient is the part every SDC HTTP client shares: a base URL, a
// per-request timeout, an x-request-id on every request, and JSON in and
// out with restify's error bodies decoded.
type restClient struct {
	service string
	base    *url.URL
	http    *http.Client
	timeout time.Duration
}

// newHTTPClient is the transport of the SDC clients: no proxy (the APIs
// are on the admin network), TCP keepalive, kept-alive connections.
func newHTTPClient() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{Transport: &http.Transport{
		DialContext:           d.DialContext,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: DefaultRequestTimeout,
	}}
}

func newRESTClient(service, address string, hc *http.Client, timeout time.Duration) (restClient, error) {
	u, err := HTTPURL(address)
	if err != nil {
		return restClient{}, fmt.Errorf("%s: %w", service, err)
	}
	if hc == nil {
		hc = newHTTPClient()
	}
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	return restClient{service: service, base: u, http: hc, timeout: timeout}, nil
}

// get fetches path?q and decodes the JSON body into into (unless nil).
// Any status but 2xx is an *APIError.
func (c *restClient) get(ctx context.Context, path string, q url.Values, into any) (http.Header, error) {
	return c.do(ctx, path, q, func(body io.Reader) error {
		if into == nil {
			return nil
		}
		return json.NewDecoder(body).Decode(into)
	})
}

// do sends GET path?q and hands a 2xx body to decode.
func (c *restClient) do(ctx context.Context, path string, q url.Values, decode func(io.Reader) error) (http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := *c.base
	u.Path += path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("x-request-id", newRequestID())
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s GET %s: %w", c.service, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		e := &APIError{Service: c.service, Path: path, Status: resp.StatusCode}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var body struct {
			Code    string       `json:"code"`
			Message string       `json:"message"`
			Errors  []FieldError `json:"errors"`
		}
		if json.Unmarshal(b, &body) == nil {
			e.Code, e.Message, e.Errors = body.Code, body.Message, body.Errors
		} else {
			e.Message = strings.TrimSpace(string(b[:min(len(b), 200)]))
		}
		return resp.Header, e
	}
	if err := decode(resp.Body); err != nil {
		return resp.Header, fmt.Errorf("%s GET %s: bad answer: %w", c.service, path, err)
	}
	return resp.Header, nil
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// backoff is an exponential delay with jitter: min, then doubling up to
// max, each delay drawn from [d/2, d] so retries of many clients spread.
type backoff struct {
	min, max time.Duration
	cur      time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur/2 + mathrand.N(b.cur/2+1)
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits d or until ctx ends, reporting whether the full wait
// happened.
func sleep(ctx context.Context, d time.Duration) bool {
	return sleepUnless(ctx, d, nil)
}

// sleepUnless waits d, or until kick fires (a poll is wanted sooner); it
// returns false only when ctx ended.
func sleepUnless(ctx context.Context, d time.Duration, kick <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-kick:
	}
	return true
}
