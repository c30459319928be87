package sdc_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// listedSink is a dc.Sink that signals the first complete inventory.
type listedSink struct {
	once   sync.Once
	listed chan struct{}
}

func (s *listedSink) SetInventory(*dc.Inventory, string) { s.once.Do(func() { close(s.listed) }) }
func (*listedSink) SetVM(*dc.VM, string)                 {}
func (*listedSink) RemoveVM(string, string)              {}
func (*listedSink) SetUser(dc.User, string)              {}
func (*listedSink) SetServers([]dc.Server, string)       {}
func (*listedSink) SetNetworks([]dc.Network, []dc.NetworkPool, string) {
}
func (*listedSink) ReportFeed(string, error) {}

func (*listedSink) BeginListing() dc.Listing { return &dc.VMList{} }

// simEndpoints reads the feed's endpoints from the simulator's config keys,
// as cns serve does.
func simEndpoints(t testing.TB, s *sdcsim.Sim) sdc.Endpoints {
	t.Helper()
	raw := map[string]json.RawMessage{}
	for k, v := range s.Config() {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		raw[k] = b
	}
	ep, err := sdc.ParseEndpoints(raw["vmapi_opts"], raw["cnapi_opts"], raw["napi_opts"], raw["ufds_opts"], raw["changefeed_opts"])
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// Every goroutine and timer the feed starts (changefeed, lister, workers,
// pollers, owner look-ups, retry timers, HTTP connections) has ended when
// Run returns.
func TestFeedRunLeavesNoGoroutines(t *testing.T) {
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 40, Seed: 11})
	s := startSim(t, inv, sdcsim.Options{})
	ep := simEndpoints(t, s)
	before := goleak.IgnoreCurrent()

	sink := &listedSink{listed: make(chan struct{})}
	f, err := sdc.NewFeed(sdc.Config{Endpoints: ep, CNAPIInterval: 10 * time.Millisecond,
		NAPIInterval: 10 * time.Millisecond, UFDSInterval: 10 * time.Millisecond,
		ReaperInterval: 10 * time.Millisecond, RetryMin: time.Millisecond}, sink)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	select {
	case <-sink.listed:
	case <-time.After(30 * time.Second):
		t.Fatal("no full listing")
	}
	// The sink hears of the listing before the feed counts it (no
	// signal for that): give the count a moment.
	for deadline := time.Now().Add(10 * time.Second); f.Status().FullSyncs < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("status %+v after the listing", f.Status())
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	goleak.VerifyNone(t, before)
}
