package feeds_test

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/records"
)

// syncBuffer is a log sink the updater may write from any goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Members of one service whose gRPC configs disagree: the store serves
// the config of the member modified last and the updater warns; when
// that member changes its mind, or leaves, the served config follows.
func TestUpdaterGRPCConfigNewestWins(t *testing.T) {
	const owner = hzOwner
	cfgOf := func(policy string) string {
		return `[{"serviceConfig":{"loadBalancingConfig":[{"` + policy + `":{}}]}}]`
	}
	var inv dc.Inventory
	inv.Users = []dc.User{{UUID: owner, Login: "alice", TritonCNSEnabled: "true", ApprovedForProvisioning: "true"}}
	inv.Servers = []dc.Server{{UUID: hzServer, Hostname: "cn1", Setup: true, Status: "running"}}
	for i, c := range []struct{ policy, modified string }{
		{"round_robin", "2025-05-21T09:00:00.000Z"},
		{"pick_first", "2025-05-21T10:00:00.000Z"}, // the newest
		{"round_robin", "2025-05-21T08:00:00.000Z"},
	} {
		vm := hzVM(i)
		vm.LastModified = c.modified
		vm.CustomerMetadata["triton.cns.grpc_config"] = cfgOf(c.policy)
		inv.VMs = append(inv.VMs, vm)
	}

	store, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var logs syncBuffer
	zc := db.ZoneConfig{Forward: map[string]db.Apex{hzZone: {MName: "ns." + hzZone + ".", RName: "hostmaster." + hzZone + ".",
		Refresh: 30, Retry: 60, Expire: 86400, Minimum: 30, SOATTL: 30, NS: []string{"ns." + hzZone + "."}, NSTTL: 3600}}}
	u, err := feeds.NewUpdater(store, feeds.Options{
		Records: records.Config{Zones: []records.Zone{{Name: hzZone, Networks: []string{"*"}}}},
		Zones:   zc, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	flush := func() {
		t.Helper()
		for range 10 {
			if err := u.Flush(); err != nil {
				t.Fatal(err)
			}
			if u.Pending() == 0 {
				return
			}
		}
		t.Fatal("still pending")
	}
	name := "_grpc_config.web.svc." + owner + "." + hzZone + "."
	served := func() string {
		t.Helper()
		zw, _ := db.ZoneWire(hzZone)
		ow, _ := db.ZoneWire(name)
		rrs, _, err := store.Lookup(hzZone, zw, ow)
		if err != nil {
			t.Fatal(err)
		}
		list, err := rrs.ToRR(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 {
			t.Fatalf("%s: %d records, want 1: %v", name, len(list), list)
		}
		return strings.Join(list[0].(*dns.TXT).Txt, "")
	}

	inv2 := inv
	u.SetInventory(&inv2, "test inventory")
	flush()
	if got := served(); !strings.Contains(got, "pick_first") {
		t.Errorf("served %s, want the newest member's pick_first", got)
	}
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"`+name+` TXT: 3 VMs disagree (2 different records); serving the newest, vm `+hzUUID(1)+`'s"`) {
		t.Errorf("no disagreement warning in the log:\n%s", logs.String())
	}

	// Member 0 is modified after member 1: its config wins now.
	vm := inv.VMs[0]
	vm.LastModified = "2025-05-21T11:00:00.000Z"
	u.SetVM(&vm, "test change")
	flush()
	if got := served(); !strings.Contains(got, "round_robin") {
		t.Errorf("served %s after member 0 changed, want round_robin", got)
	}

	// Member 0 leaves and member 1 agrees with member 2 now: no warning.
	vm = inv.VMs[1]
	vm.LastModified = "2025-05-21T12:00:00.000Z"
	vm.CustomerMetadata = map[string]any{"triton.cns.grpc_config": cfgOf("round_robin")}
	u.SetVM(&vm, "test change")
	u.RemoveVM(inv.VMs[0].UUID, "test destroy")
	mark := len(logs.String())
	flush()
	if got := served(); !strings.Contains(got, "round_robin") {
		t.Errorf("served %s, want round_robin", got)
	}
	if strings.Contains(logs.String()[mark:], "disagree") {
		t.Errorf("warned although the members agree:\n%s", logs.String()[mark:])
	}
}
