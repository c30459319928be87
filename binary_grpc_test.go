package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/balancer/grpclb" // turns on grpc-go's _grpclb._tcp SRV lookups
	lbpb "google.golang.org/grpc/balancer/grpclb/grpc_lb_v1"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// gRPC service discovery end to end: the real cns binary serves a data
// center whose VMs are real gRPC servers on loopback addresses, and
// grpc-go's own DNS resolver, pointed at cns, finds them.
//
//	greeter  g1 127.0.0.11 (older config: pick_first)
//	         g2 127.0.0.12, g3 127.0.0.13 (newest config: round_robin, timeout)
//	hello    h1 127.0.0.14 (config: grpclb)
//	big      b1 127.0.0.15 (a config of almost 4 KiB)
//	hello-lb lb 127.0.0.21 (grpclb=hello): a grpclb balancer that hands
//	         out g2 and g3, never h1
const (
	grpcZone  = "dc.grpc.example.com"
	grpcOwner = "7d1c0f3a-5b2e-4c8d-9e6f-0a1b2c3d4e5f"
	grpcLogin = "grpcuser"
	grpcNet   = "3f9a2b1c-8d7e-4f60-a5b4-c3d2e1f0a9b8"
	grpcCN    = "0c5e7a9b-1d3f-4e5a-8b7c-9d0e1f2a3b4c"
)

// The service config choices of greeter's members. The newest has a
// choice for other languages first, so the TXT needs two strings and
// grpc-go must pick the Go choice.
var (
	greeterConfigNew = `[
  {"clientLanguage": ["java", "c++"], "serviceConfig": {"loadBalancingConfig": [{"pick_first": {}}]}},
  {"clientLanguage": ["GO"], "percentage": 100, "serviceConfig": {
    "loadBalancingConfig": [{"round_robin": {}}],
    "methodConfig": [
      {"name": [{"service": "grpc.health.v1.Health", "method": "Check"}], "timeout": "9.5s"},
      {"name": [{"service": "example.Unused"}], "timeout": "1s", "waitForReady": true}
    ]}}
]`
	greeterConfigOld = `[{"serviceConfig": {"loadBalancingConfig": [{"pick_first": {}}]}}]`
	helloConfig      = `[{"serviceConfig": {"loadBalancingConfig": [{"grpclb": {}}]}}]`
	bigConfig        = bigGRPCConfig()
)

// bigGRPCConfig is a service config just below cns's 4096-octet limit:
// its TXT answer needs TCP.
func bigGRPCConfig() string {
	mcs := []string{`{"name":[{"service":"grpc.health.v1.Health"}],"timeout":"8.5s"}`}
	for i := 0; ; i++ {
		mc := fmt.Sprintf(`{"name":[{"service":"example.padding.Service%03d"}],"timeout":"1s","waitForReady":true}`, i)
		cfg := `[{"serviceConfig":{"methodConfig":[` + strings.Join(append(mcs, mc), ",") + `]}}]`
		if len(cfg) > 4096 {
			return `[{"serviceConfig":{"methodConfig":[` + strings.Join(mcs, ",") + `]}}]`
		}
		mcs = append(mcs, mc)
	}
}

// backend is one member's gRPC server: the health service, answering
// which backend it is and how long the call's deadline had left.
type backend struct {
	healthpb.UnimplementedHealthServer
	id string
}

func (b *backend) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	md := metadata.Pairs("backend", b.id)
	if dl, ok := ctx.Deadline(); ok {
		md.Append("deadline-ms", strconv.FormatInt(time.Until(dl).Milliseconds(), 10))
	}
	if err := grpc.SetHeader(ctx, md); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// lbServer is a grpclb balancer (grpc.lb.v1.LoadBalancer) that sends
// every client the same server list and remembers the names asked for.
type lbServer struct {
	lbpb.UnimplementedLoadBalancerServer
	servers []*lbpb.Server

	mu    sync.Mutex
	names []string
}

func (l *lbServer) BalanceLoad(stream lbpb.LoadBalancer_BalanceLoadServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.names = append(l.names, req.GetInitialRequest().GetName())
	l.mu.Unlock()
	for _, resp := range []*lbpb.LoadBalanceResponse{
		{LoadBalanceResponseType: &lbpb.LoadBalanceResponse_InitialResponse{InitialResponse: &lbpb.InitialLoadBalanceResponse{}}},
		{LoadBalanceResponseType: &lbpb.LoadBalanceResponse_ServerList{ServerList: &lbpb.ServerList{Servers: l.servers}}},
	} {
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
	for {
		if _, err := stream.Recv(); err != nil {
			return nil
		}
	}
}

func (l *lbServer) asked() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.names)
}

// serveGRPC serves srv on lis until the test ends.
func serveGRPC(t *testing.T, lis net.Listener, register func(*grpc.Server)) {
	t.Helper()
	s := grpc.NewServer()
	register(s)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
}

// listenAll listens on the same free port on every address.
func listenAll(t *testing.T, addrs ...string) (int, []net.Listener) {
	t.Helper()
	for range 20 {
		first, err := net.Listen("tcp", addrs[0]+":0")
		if err != nil {
			t.Skipf("cannot listen on %s (needs the 127.0.0.0/8 loopback): %v", addrs[0], err)
		}
		port := first.Addr().(*net.TCPAddr).Port
		ls := []net.Listener{first}
		for _, a := range addrs[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(a, strconv.Itoa(port)))
			if err != nil {
				break
			}
			ls = append(ls, l)
		}
		if len(ls) == len(addrs) {
			return port, ls
		}
		for _, l := range ls {
			l.Close()
		}
	}
	t.Fatalf("no port free on all of %v", addrs)
	return 0, nil
}

func grpcVM(uuid, alias, ip, services, config, modified string) dc.VM {
	meta := map[string]any{}
	if config != "" {
		meta["triton.cns.grpc_config"] = config
	}
	return dc.VM{UUID: uuid, Alias: &alias, OwnerUUID: grpcOwner, ServerUUID: grpcCN, State: "running", Brand: "joyent",
		LastModified: modified,
		NICs:         []dc.NIC{{Interface: "net0", IP: ip, IPs: []string{ip + "/8"}, NetworkUUID: grpcNet, NICTag: "external", Primary: true}},
		Tags:         map[string]any{"triton.cns.services": services}, CustomerMetadata: meta}
}

// grpcDC is the running data center: cns, the members' port, the
// balancer and its port.
type grpcDC struct {
	p      *proc
	port   int
	lbPort int
	lb     *lbServer
}

// startGRPCDC starts the gRPC servers and a cns serving them.
func startGRPCDC(t *testing.T) *grpcDC {
	t.Helper()
	backends := []string{"127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14", "127.0.0.15"}
	port, ls := listenAll(t, backends...)
	for i, l := range ls {
		b := &backend{id: backends[i]}
		serveGRPC(t, l, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, b) })
	}
	lbPort, lbl := listenAll(t, "127.0.0.21")
	lb := &lbServer{}
	for _, ip := range []string{"127.0.0.12", "127.0.0.13"} {
		lb.servers = append(lb.servers, &lbpb.Server{IpAddress: net.ParseIP(ip).To4(), Port: int32(port), LoadBalanceToken: "token-" + ip})
	}
	serveGRPC(t, lbl[0], func(s *grpc.Server) { lbpb.RegisterLoadBalancerServer(s, lb) })

	svc := fmt.Sprintf("greeter:%d", port)
	inv := dc.Inventory{
		Users:    []dc.User{{UUID: grpcOwner, Login: grpcLogin, TritonCNSEnabled: "true", ApprovedForProvisioning: "true"}},
		Servers:  []dc.Server{{UUID: grpcCN, Hostname: "cn1", Setup: true, Status: "running"}},
		Networks: []dc.Network{{UUID: grpcNet, Name: "loopback", Subnet: "127.0.0.0/8"}},
		VMs: []dc.VM{
			grpcVM("a1111111-0000-4000-8000-000000000001", "g1", "127.0.0.11", svc, greeterConfigOld, "2025-06-01T10:00:00.000Z"),
			grpcVM("a1111111-0000-4000-8000-000000000002", "g2", "127.0.0.12", svc, greeterConfigNew, "2025-06-01T11:00:00.000Z"),
			grpcVM("a1111111-0000-4000-8000-000000000003", "g3", "127.0.0.13", svc, greeterConfigNew, "2025-06-01T12:00:00.000Z"),
			grpcVM("a1111111-0000-4000-8000-000000000004", "h1", "127.0.0.14", fmt.Sprintf("hello:%d", port), helloConfig, "2025-06-01T12:00:00.000Z"),
			grpcVM("a1111111-0000-4000-8000-000000000006", "b1", "127.0.0.15", fmt.Sprintf("big:%d", port), bigConfig, "2025-06-01T12:00:00.000Z"),
			grpcVM("a1111111-0000-4000-8000-000000000005", "lb", "127.0.0.21", fmt.Sprintf("hello-lb:%d:grpclb=hello", lbPort), "", "2025-06-01T12:00:00.000Z"),
		},
	}
	dir := t.TempDir()
	raw, err := json.Marshal(&inv)
	if err != nil {
		t.Fatal(err)
	}
	invPath := filepath.Join(dir, "grpc-inventory.json")
	if err := os.WriteFile(invPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, dir, "", func(m map[string]any) {
		m["inventory_file"] = invPath
		m["forward_zones"] = map[string]any{grpcZone: map[string]any{"networks": []string{"*"}}}
	})
	p := startCNS(t, cfg)
	p.waitCommitted(0)
	return &grpcDC{p: p, port: port, lbPort: lbPort, lb: lb}
}

// dial makes a grpc-go client channel for name:port resolved by cns
// (grpc-go's DNS resolver with cns as its authority).
func (dc *grpcDC) dial(t *testing.T, name string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	target := fmt.Sprintf("dns://%s/%s:%d", dc.p.addr, name, dc.port)
	conn, err := grpc.NewClient(target, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatalf("%s: %v", target, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// rpcs is what n health checks on one channel saw.
type rpcs struct {
	hits      map[string]int // calls per backend
	deadlines []int64        // ms left of each call's deadline at the server
	first     time.Duration  // until the first answer: resolution and connection
	total     time.Duration
}

// calls makes n health checks, each with a 20 s deadline of its own.
func calls(t *testing.T, conn *grpc.ClientConn, n int) rpcs {
	t.Helper()
	r := rpcs{hits: map[string]int{}}
	client := healthpb.NewHealthClient(conn)
	start := time.Now()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var md metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
		cancel()
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if i == 0 {
			r.first = time.Since(start)
		}
		if id := md.Get("backend"); len(id) == 1 {
			r.hits[id[0]]++
		}
		if d := md.Get("deadline-ms"); len(d) == 1 {
			ms, _ := strconv.ParseInt(d[0], 10, 64)
			r.deadlines = append(r.deadlines, ms)
		}
	}
	r.total = time.Since(start)
	return r
}

// rawTXT returns the character-strings of a TXT record as they are on
// the wire.
func rawTXT(t *testing.T, rr *dns.TXT) []string {
	t.Helper()
	buf := make([]byte, 1<<16)
	off, err := dns.PackRR(rr, buf, 0, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	rd := buf[off-int(rr.Hdr.Rdlength) : off]
	var out []string
	for len(rd) > 0 && int(rd[0]) < len(rd) {
		out = append(out, string(rd[1:1+int(rd[0])]))
		rd = rd[1+int(rd[0]):]
	}
	return out
}

func TestGRPCServiceDiscovery(t *testing.T) {
	dc := startGRPCDC(t)
	p := dc.p
	greeter := "greeter.svc." + grpcLogin + "." + grpcZone
	hello := "hello.svc." + grpcLogin + "." + grpcZone
	helloLB := "hello-lb.svc." + grpcLogin + "." + grpcZone

	// The records, as any DNS client sees them.
	t.Run("dns", func(t *testing.T) {
		for _, owner := range []string{grpcLogin, grpcOwner} {
			name := "_grpclb._tcp.hello.svc." + owner + "." + grpcZone
			r := p.query("udp", name, dns.TypeSRV)
			want := fmt.Sprintf("%s.\t30\tIN\tSRV\t0 0 %d hello-lb.svc.%s.%s.", name, dc.lbPort, owner, grpcZone)
			if len(r.Answer) != 1 || r.Answer[0].String() != want {
				t.Errorf("%s SRV: %v, want %s", name, r.Answer, want)
			}
		}
		if r := p.query("udp", helloLB, dns.TypeA); len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "127.0.0.21" {
			t.Errorf("%s A: %v", helloLB, r.Answer)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(greeterConfigNew)); err != nil {
			t.Fatal(err)
		}
		for _, proto := range []string{"udp", "tcp"} {
			r := p.query(proto, "_grpc_config."+greeter, dns.TypeTXT)
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				t.Fatalf("_grpc_config.%s TXT over %s: %s %v", greeter, proto, dns.RcodeToString[r.Rcode], r.Answer)
			}
			raw := rawTXT(t, r.Answer[0].(*dns.TXT))
			if len(raw) < 2 || slices.ContainsFunc(raw[:len(raw)-1], func(s string) bool { return len(s) != 255 }) {
				t.Errorf("TXT strings of %d octets, want 255 each but the last", len(raw))
			}
			if got, want := strings.Join(raw, ""), "grpc_config="+compact.String(); got != want {
				t.Errorf("TXT joins to\n%s\nwant the newest member's\n%s", got, want)
			}
		}
		// Absent configs answer at once, without an error a client would
		// retry: NXDOMAIN where nothing is below.
		for _, name := range []string{"_grpc_config." + helloLB, "_grpc_config.nothing.svc." + grpcLogin + "." + grpcZone} {
			if r := p.query("udp", name, dns.TypeTXT); r.Rcode != dns.RcodeNameError || len(r.Answer) != 0 {
				t.Errorf("%s TXT: %s %v, want NXDOMAIN", name, dns.RcodeToString[r.Rcode], r.Answer)
			}
		}
		// Members disagree: the operator hears which config won.
		p.waitLog(time.Second, func(l logLine) bool {
			return l["level"] == 40.0 && strings.Contains(l.str("msg"), "_grpc_config."+greeter+". TXT: 3 VMs disagree") &&
				strings.Contains(l.str("msg"), "a1111111-0000-4000-8000-000000000003")
		})
	})

	// grpc-go reads the TXT: round_robin over the three members, and the
	// method's timeout reaches the server as the call's deadline.
	t.Run("service config", func(t *testing.T) {
		conn := dc.dial(t, greeter)
		// Until every member's connection is up, round_robin picks among
		// those that are.
		start := time.Now()
		warm := calls(t, conn, 1)
		for len(warm.hits) < 3 && time.Since(start) < 10*time.Second {
			for b, n := range calls(t, conn, 1).hits {
				warm.hits[b] += n
			}
		}
		t.Logf("greeter: first answer after %v (resolution and connection), all 3 members after %v",
			warm.first, time.Since(start))
		r := calls(t, conn, 30)
		t.Logf("greeter: 30 calls in %v: %v", r.total, r.hits)
		for _, b := range []string{"127.0.0.11", "127.0.0.12", "127.0.0.13"} {
			if r.hits[b] != 10 {
				t.Errorf("backend %s had %d of 30 calls, want 10 (round_robin): %v", b, r.hits[b], r.hits)
			}
		}
		if len(r.deadlines) != 30 || slices.ContainsFunc(r.deadlines, func(ms int64) bool { return ms <= 7500 || ms > 9500 }) {
			t.Errorf("deadlines at the server %v ms, want the service config's 9.5 s on each of 30", r.deadlines)
		}

		// The control: the same name without the service config is
		// pick_first, with the caller's own 20 s deadline.
		r = calls(t, dc.dial(t, greeter, grpc.WithDisableServiceConfig()), 30)
		if len(r.hits) != 1 || slices.ContainsFunc(r.deadlines, func(ms int64) bool { return ms < 15000 }) {
			t.Errorf("without the service config: backends %v, deadlines %v; want one backend, 20 s", r.hits, r.deadlines)
		}
	})

	// grpc-go with grpclb: the TXT picks the grpclb policy, the SRV
	// names the balancer, and the balancer's list (g2, g3) carries the
	// calls, not the A record of hello (h1).
	// A config near the size limit: over UDP (EDNS, 1232 octets as Go's
	// resolver asks) the answer is truncated, grpc-go retries over TCP
	// and applies it.
	t.Run("big config", func(t *testing.T) {
		big := "big.svc." + grpcLogin + "." + grpcZone
		m := new(dns.Msg)
		m.SetQuestion("_grpc_config."+big+".", dns.TypeTXT)
		m.SetEdns0(1232, false)
		udp, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, p.addr)
		if err != nil || !udp.Truncated {
			t.Errorf("over UDP: %v, truncated %v", err, udp != nil && udp.Truncated)
		}
		tcp, _, err := (&dns.Client{Net: "tcp", Timeout: 2 * time.Second}).Exchange(m, p.addr)
		if err != nil || len(tcp.Answer) != 1 {
			t.Fatalf("over TCP: %v %v", err, tcp)
		}
		raw := rawTXT(t, tcp.Answer[0].(*dns.TXT))
		wire, _ := tcp.Pack()
		t.Logf("config of %d octets: TXT of %d strings, answer of %d octets over TCP", len(bigConfig), len(raw), len(wire))
		r := calls(t, dc.dial(t, big), 5)
		t.Logf("big: first answer after %v", r.first)
		if len(r.deadlines) != 5 || slices.ContainsFunc(r.deadlines, func(ms int64) bool { return ms <= 6500 || ms > 8500 }) {
			t.Errorf("deadlines at the server %v ms, want the big config's 8.5 s", r.deadlines)
		}
	})

	t.Run("grpclb", func(t *testing.T) {
		conn := dc.dial(t, hello)
		start := time.Now()
		r := calls(t, conn, 1)
		for len(r.hits) < 2 && time.Since(start) < 10*time.Second {
			for b, n := range calls(t, conn, 1).hits {
				r.hits[b] += n
			}
		}
		t.Logf("hello: first answer after %v (resolution, balancer, connection), both servers after %v", r.first, time.Since(start))
		more := calls(t, conn, 20)
		t.Logf("hello: 20 calls in %v: %v", more.total, more.hits)
		for b, n := range more.hits {
			r.hits[b] += n
		}
		if more.hits["127.0.0.12"] != 10 || more.hits["127.0.0.13"] != 10 || len(r.hits) != 2 {
			t.Errorf("backends %v (last 20: %v), want the balancer's 127.0.0.12 and .13 only, in turn", r.hits, more.hits)
		}
		if asked := dc.lb.asked(); len(asked) == 0 || asked[0] != fmt.Sprintf("%s:%d", hello, dc.port) {
			t.Errorf("the balancer was asked for %q, want %s:%d", asked, hello, dc.port)
		}
	})
}
