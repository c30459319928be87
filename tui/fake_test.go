package tui

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tritondatacenter/cns/admin"
)

// now is the fixed clock of the model tests.
var now = time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return now }

const (
	cnsZone  = "us-west-1.cns.example.com"
	intZone  = "us-west-1.int.example.com"
	revZone  = "100.51.198.in-addr.arpa"
	alice    = "6c96670e-4204-4bc0-bd64-b4c576c09876"
	carol    = "1e822e44-a4bc-4aa2-921b-b5c626386e22"
	web0     = "fb576cd8-2cf6-4182-b2a9-c6ba9c73834e"
	web1     = "2bcfed83-01c4-4486-9c9e-b7bb9b686831"
	web2     = "f47889c3-2578-42e6-a1e6-7d0ef46e7fd6"
	web3     = "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f" // down since before cns saw it
	gone     = "d00dfeed-0000-4000-8000-00000000dead" // destroyed and reaped: no alias
	carolWeb = "e76f7f8b-fb63-4c58-adf4-5b275a0d5aa6"
)

// fakeSource answers with fixed data; down makes every read fail as an
// unreachable API does.
type fakeSource struct {
	mu    sync.Mutex
	down  bool
	calls map[string]int
}

func newFake() *fakeSource { return &fakeSource{calls: map[string]int{}} }

// errRefused is what the admin client returns when nothing listens.
var errRefused = fmt.Errorf("cns API at http://127.0.0.1:5380: %w", &url.Error{Op: "Get", URL: "http://127.0.0.1:5380/zones",
	Err: &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5380},
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}})

func (f *fakeSource) setDown(d bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = d
}

func (f *fakeSource) call(what string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[what]++
	if f.down {
		return errRefused
	}
	return nil
}

func (f *fakeSource) Describe() string { return "api http://127.0.0.1:5380" }
func (f *fakeSource) Live() bool       { return true }

func (f *fakeSource) Zones(ctx context.Context) ([]admin.Zone, error) {
	if err := f.call("zones"); err != nil {
		return nil, err
	}
	return []admin.Zone{
		{Name: revZone, Serial: 1741953500, Reverse: true, Names: 10, Records: 10, LastChange: now.Add(-100 * time.Minute),
			Journal: admin.Journal{From: 1741947000, Entries: 3, Bytes: 900}},
		{Name: cnsZone, Serial: 1741953590, Names: 80, Records: 204, LastChange: now.Add(-150 * time.Second),
			Journal: admin.Journal{From: 1741940000, Entries: 12, Bytes: 5800},
			Peers: []admin.ZonePeer{
				{Address: "192.0.2.53", Serial: 1741953590, Version: "9.18.28"},
				{Address: "192.0.2.54", Serial: 1741953587, DriftSerials: 3, DriftSeconds: 150, Version: "Knot DNS 3.2.6"},
				{Address: "192.0.2.55", DriftSeconds: -1},
			},
			Propagation: &admin.Propagation{Zone: cnsZone, Serial: 1741953590, State: admin.StatePending, Committed: now.Add(-150 * time.Second),
				Peers: []admin.PeerPropagation{
					{Address: "192.0.2.53", Serial: 1741953590, SignerSerial: 1741953601, State: admin.StateActive, Seconds: 0.4, Polls: 1},
					{Address: "192.0.2.54", Serial: 1741953587, State: admin.StateError, Seconds: -1, Polls: 20},
					{Address: "192.0.2.55", State: admin.StatePending, Seconds: -1, Polls: 3},
				}}},
		{Name: intZone, Serial: 1741953590, Names: 140, Records: 332, LastChange: now.Add(-150 * time.Second),
			Journal: admin.Journal{From: 1741940000, Entries: 12, Bytes: 9100}},
	}, nil
}

func (f *fakeSource) History(ctx context.Context, zone string, limit int) ([]admin.Change, error) {
	if err := f.call("history"); err != nil {
		return nil, err
	}
	return []admin.Change{
		{From: 1741953580, To: 1741953587, Time: now.Add(-20 * time.Minute), Cause: "inventory file changed: 1 VM",
			Added: []string{"web2.inst.alice." + cnsZone + ". 30 IN A 198.51.100.12"}},
		{From: 1741953587, To: 1741953590, Time: now.Add(-150 * time.Second), Cause: "hysteresis: web2 left web",
			Deleted: []string{"web.svc.alice." + cnsZone + ". 30 IN A 198.51.100.12",
				"web.svc.alice." + cnsZone + ". 30 IN TXT \"" + web2 + "\""}},
	}, nil
}

func (f *fakeSource) Peers(ctx context.Context) ([]admin.Peer, error) {
	if err := f.call("peers"); err != nil {
		return nil, err
	}
	return []admin.Peer{
		{Address: "192.0.2.53", Version: "9.18.28", UsingNotify: true, UsingIXFR: true,
			Counters: map[string]uint64{"soa": 40, "axfr": 1, "ixfr": 12, "goodxfer": 13},
			Zones: map[string]admin.PeerZone{cnsZone: {ZoneSerial: 1741953590, ZoneTracking: admin.ZoneTracking{Serial: 1741953590, LastTransfer: now.Add(-148 * time.Second),
				LastKind: "IXFR", AXFR: 1, IXFR: 12, NotifySerial: 1741953590, NotifySent: now.Add(-149 * time.Second), NotifyAcked: now.Add(-149 * time.Second)}}}},
		{Address: "192.0.2.54", Version: "Knot DNS 3.2.6", NotifyFailures: 2, UsingNotify: true,
			Counters: map[string]uint64{"soa": 9, "axfr": 1, "ixfr": 0, "goodxfer": 1},
			Zones: map[string]admin.PeerZone{cnsZone: {ZoneSerial: 1741953590, DriftSerials: 3, DriftSeconds: 150,
				ZoneTracking: admin.ZoneTracking{Serial: 1741953587, LastTransfer: now.Add(-40 * time.Minute), LastKind: "AXFR", AXFR: 1,
					NotifySerial: 1741953590, NotifySent: now.Add(-150 * time.Second)}}}},
	}, nil
}

func (f *fakeSource) Services(ctx context.Context) ([]admin.Service, error) {
	if err := f.call("services"); err != nil {
		return nil, err
	}
	return []admin.Service{
		{Owner: alice, Login: "alice", Service: "db", Listed: 2, N: 2, Budget: 1, BudgetLeft: 1,
			Members: []admin.ServiceMember{{VM: "8bcba6b8-f352-4df4-b788-2c0017ba7760", Alias: "db0", Status: admin.MemberUp},
				{VM: "b9974d54-9a8f-4f94-b667-d41ae9d26935", Alias: "db1", Status: admin.MemberUp}}},
		{Owner: alice, Login: "alice", Service: "web", Listed: 2, N: 3, Budget: 1, BudgetLeft: 0,
			WindowFreesAt: now.Add(45 * time.Second), NextCheck: now.Add(45 * time.Second),
			Members: []admin.ServiceMember{
				{VM: web3, Alias: "web3", Status: admin.MemberLeft, MemberTimes: admin.MemberTimes{DownSince: now.Add(-2 * time.Hour), FirstSeenDown: now.Add(-2 * time.Hour)}},
				{VM: web1, Alias: "web1", Status: admin.MemberPending, MemberTimes: admin.MemberTimes{DownSince: now.Add(-15 * time.Second), MayLeaveAt: now.Add(45 * time.Second)}},
				{VM: web2, Alias: "web2", Status: admin.MemberLeft, MemberTimes: admin.MemberTimes{DownSince: now.Add(-15 * time.Second), LeftAt: now.Add(-15 * time.Second)}},
				{VM: web0, Alias: "web0", Status: admin.MemberUp},
			},
			Departures: []admin.Departure{{VM: web2, Alias: "web2", At: now.Add(-15 * time.Second)}},
			History: []admin.Decision{
				{Time: now.Add(-15 * time.Second), VM: web2, Alias: "web2", Action: "released", Reason: "self-removal 1 of 1 (n=3) in the last 1m0s"},
				{Time: now.Add(-15 * time.Second), VM: web1, Alias: "web1", Action: "pending", Reason: "window budget spent: 1 of 1 self-removals (n=3)"},
				{Time: now.Add(-15 * time.Second), VM: gone, Action: "hard-removed", Reason: "destroyed"},
			}},
	}, nil
}

var fakeVMs = []admin.VMSummary{
	{UUID: "b752d788-c0e4-4307-8c56-353a4ea66c02", Alias: "cloudapi0", Owner: "e455fe43-e6d9-472a-9efc-decac2709f78", Login: "admin",
		State: "running", ListInstance: true, ListServices: true, Reasons: []string{"user_en_flag", "admin"}},
	{UUID: carolWeb, Alias: "carol-web", Owner: carol, Login: "carol", State: "running", Reasons: []string{"user_en_flag"}},
	{UUID: web0, Alias: "web0", Owner: alice, Login: "alice", State: "running", ListInstance: true, ListServices: true, Reasons: []string{}},
	{UUID: web2, Alias: "web2", Owner: alice, Login: "alice", State: "running", ListInstance: true, Reasons: []string{"inst_en_flag"}},
}

func (f *fakeSource) SearchVMs(ctx context.Context, q string, limit int) (*admin.VMSearch, error) {
	if err := f.call("vms"); err != nil {
		return nil, err
	}
	res := &admin.VMSearch{Query: q, VMs: []admin.VMSummary{}}
	for _, v := range fakeVMs {
		if strings.Contains(v.UUID+" "+v.Alias+" "+v.Login+" "+v.Owner, q) {
			res.VMs = append(res.VMs, v)
		}
	}
	return res, nil
}

func (f *fakeSource) VM(ctx context.Context, uuid string) (*admin.VM, error) {
	if err := f.call("vm"); err != nil {
		return nil, err
	}
	if uuid != carolWeb {
		return nil, &admin.Error{Status: 404, Code: "ResourceNotFound", Message: "VM not found"}
	}
	return &admin.VM{UUID: carolWeb, Alias: "carol-web", Owner: carol, Login: "carol", State: "running",
		Server: "f3c0a6aa-07e9-433a-add6-bdc0c11cd0b9", LastVisit: now.Add(-3 * time.Minute).UnixMilli(),
		Names: []string{}, Reasons: []string{"user_en_flag"}, Services: []string{"web"}}, nil
}

func (f *fakeSource) Feeds(ctx context.Context) (*admin.Feeds, error) {
	if err := f.call("feeds"); err != nil {
		return nil, err
	}
	return &admin.Feeds{
		Feeds: []admin.FeedStatus{
			{Name: "cnapi", Healthy: true, Since: now.Add(-3 * time.Hour), LastOK: now.Add(-20 * time.Second)},
			{Name: "ufds", Healthy: false, Since: now.Add(-90 * time.Second), LastOK: now.Add(-7 * time.Minute),
				Reason: "ldaps://ufds.us-west-1.example.com:636: connection reset by peer"},
			{Name: "vmapi", Healthy: true, Since: now.Add(-3 * time.Hour), LastOK: now.Add(-1 * time.Second)},
		},
		Pending:    2,
		LastCommit: &admin.Commit{Time: now.Add(-150 * time.Second), VMs: 1, DurationMS: 3.2, OldestChangeMS: 27.5},
		RemovalGuard: &admin.RemovalGuard{WindowSeconds: 60, MinVMs: 20, Percent: 25, ConfirmSeconds: 600, Holds: []admin.RemovalHold{{
			Cause: "cn_down", Phase: "holding", Since: now.Add(-2 * time.Minute), VMs: 495, Peak: 495, Of: 1020,
			ConfirmAt: now.Add(8 * time.Minute), What: "compute nodes reported down by CNAPI", Upstream: "CNAPI"}}},
		Sources: []admin.AggregateSource{
			{Region: "us-west.cns.example.com", Zone: "us-west-2.cns.example.com", State: "ok", Serial: 1795486001,
				LastTransfer: now.Add(-40 * time.Second), LastKind: "IXFR", LastCheck: now.Add(-2 * time.Second), LagSeconds: 2, Names: 4120},
			{Region: "us-west.cns.example.com", Zone: "us-west-3.cns.example.com", State: "stale", Serial: 1795485000,
				LastTransfer: now.Add(-2 * time.Hour), LastKind: "AXFR", LastCheck: now.Add(-10 * time.Minute), LagSeconds: 600, Names: 3900,
				Error: "127.0.0.1:53: i/o timeout"},
		},
	}, nil
}
