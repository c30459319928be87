package sdcsim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

func TestFaultStatusTimes(t *testing.T) {
	s := startSim(t, Options{})
	s.SetFault(RouteListVMs, Fault{Times: 2, Status: http.StatusServiceUnavailable})
	for i := range 2 {
		var e restError
		if code, _ := get(t, s.VMAPIURL(), "/vms?state=active", &e); code != 503 || e.Code != "MorayBucketsNotSetup" {
			t.Fatalf("request %d: %d %+v", i, code, e)
		}
	}
	if code, _ := get(t, s.VMAPIURL(), "/vms?state=active", nil); code != 200 {
		t.Fatalf("after the fault: %d", code)
	}
	if n := s.Requests(RouteListVMs); n != 3 {
		t.Fatalf("Requests = %d", n)
	}
}

func TestFaultGlobalSparesPing(t *testing.T) {
	s := startSim(t, Options{})
	s.SetFault(AnyRoute, Fault{Status: http.StatusInternalServerError})
	for _, tc := range []struct{ base, path string }{
		{s.VMAPIURL(), "/vms/" + vmID(1)},
		{s.CNAPIURL(), "/servers"},
		{s.NAPIURL(), "/network_pools"},
		{s.VMAPIURL(), "/changefeeds"},
	} {
		var e restError
		if code, _ := get(t, tc.base, tc.path, &e); code != 500 || e.Code != "InternalError" {
			t.Errorf("%s: %d %+v", tc.path, code, e)
		}
	}
	if code, _ := get(t, s.VMAPIURL(), "/ping", nil); code != 200 {
		t.Errorf("ping under a global fault: %d", code)
	}
	// A route's own fault wins over the global one.
	s.SetFault(RouteGetNetwork, Fault{Status: http.StatusNotFound})
	var e restError
	if code, _ := get(t, s.NAPIURL(), "/networks/"+netExt, &e); code != 404 || e.Code != "ResourceNotFound" {
		t.Errorf("route fault: %d %+v", code, e)
	}
	s.ClearFaults()
	if code, _ := get(t, s.CNAPIURL(), "/servers", nil); code != 200 {
		t.Errorf("after ClearFaults: %d", code)
	}
}

func TestFaultMalformedAndFraction(t *testing.T) {
	s := startSim(t, Options{})
	s.SetFault(RouteListServers, Fault{Fraction: 1, Times: 1, Malformed: true})
	resp, err := httpClient.Get(s.CNAPIURL() + "/servers")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var v any
	if resp.StatusCode != 200 || json.Unmarshal(body, &v) == nil {
		t.Fatalf("malformed: %d %q decodes", resp.StatusCode, body)
	}
	if code, _ := get(t, s.CNAPIURL(), "/servers", &v); code != 200 {
		t.Fatalf("after: %d", code)
	}
}

func TestFaultLatencyAndHang(t *testing.T) {
	s := startSim(t, Options{})
	s.SetFault(RouteGetVM, Fault{Times: 1, Latency: 50 * time.Millisecond})
	start := time.Now()
	if code, _ := get(t, s.VMAPIURL(), "/vms/"+vmID(1), nil); code != 200 {
		t.Fatalf("latency: %d", code)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("answered in %v despite 50ms latency", d)
	}

	// A hung request ends when the client gives up...
	s.SetFault(RouteGetVM, Fault{Times: 1, Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.VMAPIURL()+"/vms/"+vmID(1), nil)
	if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung request: %v, want the client's deadline", err)
	}

	// ...or when released, and then gets the real answer.
	s.SetFault(RouteGetVM, Fault{Times: 1, Hang: true})
	done := make(chan int)
	go func() {
		resp, err := httpClient.Get(s.VMAPIURL() + "/vms/" + vmID(1))
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	waitFor(t, "the hung request", func() bool { return s.Requests(RouteGetVM) == 3 })
	select {
	case code := <-done:
		t.Fatalf("answered %d before release", code)
	default:
	}
	s.ReleaseHangs()
	if code := <-done; code != 200 {
		t.Fatalf("released request: %d", code)
	}
}

func TestFaultFraction(t *testing.T) {
	s := startSim(t, Options{Seed: 7})
	s.SetFault(RoutePing, Fault{Fraction: 0.5, Status: http.StatusInternalServerError})
	failed := 0
	for range 100 {
		if code, _ := get(t, s.VMAPIURL(), "/ping", nil); code == 500 {
			failed++
		}
	}
	if failed < 25 || failed > 75 {
		t.Fatalf("%d of 100 requests failed with Fraction 0.5", failed)
	}
}
