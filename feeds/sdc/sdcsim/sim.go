package sdcsim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// Options tune a simulator. The zero value is a fast, faithful default
// for tests.
type Options struct {
	// RootDN and RootPassword are UFDS's root credentials ("cn=root" and
	// "secret", COAL's, by default).
	RootDN       string
	RootPassword string

	// DeliveryInterval is the changefeed publisher's sweep period (VMAPI
	// uses 2 s). Zero delivers every item as soon as it is published.
	DeliveryInterval time.Duration
	// DuplicateFanout reproduces changefeed 1.5.x (VMAPI 9.x), which sends
	// an item once per matching subResource entry; off, it is sent once
	// per listener as in 1.4.0.
	DuplicateFanout bool
	// ResourceObject adds the VM to change items, as VMAPI builds from
	// 2020-11 on do (TRITON-2183).
	ResourceObject bool

	// VMAPILimit is the vmapi_opts.limit that Config reports (500, the
	// SAPI default, when zero).
	VMAPILimit int
	// Instance is the changefeed_opts.instance Config reports (a random
	// UUID when empty).
	Instance string
	// PlainLDAPInConfig makes Config point ufds_opts at plain LDAP instead
	// of LDAPS.
	PlainLDAPInConfig bool
	// CertDir is where the LDAPS certificate is written as ufds-ca.pem; by
	// default a temporary directory removed by Close.
	CertDir string

	// Now is the clock for timestamps (time.Now by default).
	Now func() time.Time
	// Seed seeds the choice of requests hit by a Fault's Fraction.
	Seed uint64
	// Logger receives debug and error messages (discarded by default).
	Logger *slog.Logger
}

// Sim is a running simulated Triton data center: VMAPI with its
// changefeed, CNAPI, NAPI and UFDS, each on its own 127.0.0.1 port, over one
// world. All methods are safe for concurrent use.
type Sim struct {
	opts Options
	log  *slog.Logger
	now  func() time.Time

	mu      sync.Mutex
	vms     map[string]*vmRecord
	vmOrder []string
	// vmGen counts VM mutations; listCount caches one ListVms count for
	// the generation it was made in.
	vmGen     uint64
	listCount struct {
		gen   uint64
		query string
		n     int
	}
	servers   map[string]dc.Server
	users     map[string]*userEntry
	userOrder []string
	networks  map[string]dc.Network
	pools     map[string]dc.NetworkPool
	changelog []ChangelogEntry
	// nextChange is the last changelog number handed out.
	nextChange int

	faults *faultTable
	services
	tlsFiles

	closeOnce sync.Once
	closed    chan struct{}

	crashLog
}

// crashLog lists the requests that would have made a real service exit.
type crashLog struct {
	crashMu sync.Mutex
	crashes []string
}

// services are the simulated SDC services and their listeners.
type services struct {
	feed               *publisher
	vmapi, cnapi, napi *httpService
	ldap               *ldapServer
}

// tlsFiles are the simulator's certificate and where its files go.
type tlsFiles struct {
	certPEM  []byte
	certFile string
	tmpDir   string
}

// New starts a simulator over a copy of inv. It does not validate the
// inventory, so that tests can serve what a real DC may (a VM naming a
// network NAPI lacks, two users with one login); dc.LoadInventory does.
func New(inv dc.Inventory, opts Options) (*Sim, error) {
	if opts.RootDN == "" {
		opts.RootDN = "cn=root"
	}
	if opts.RootPassword == "" {
		opts.RootPassword = "secret"
	}
	if opts.VMAPILimit == 0 {
		opts.VMAPILimit = 500
	}
	if opts.Instance == "" {
		opts.Instance = newUUID()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sim{
		opts:   opts,
		log:    opts.Logger,
		now:    opts.Now,
		faults: newFaultTable(opts.Seed),
		closed: make(chan struct{}),
	}
	s.feed = newPublisher(s, opts)
	if err := s.load(inv); err != nil {
		s.feed.close()
		return nil, err
	}

	if err := s.start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Sim) start() error {
	cert, certPEM, err := selfSigned(s.now())
	if err != nil {
		return err
	}
	s.certPEM = certPEM
	dir := s.opts.CertDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "sdcsim-ufds-"); err != nil {
			return fmt.Errorf("sdcsim: certificate directory: %w", err)
		}
		s.tmpDir = dir
	}
	s.certFile = filepath.Join(dir, "ufds-ca.pem")
	if err := os.WriteFile(s.certFile, certPEM, 0o644); err != nil {
		return fmt.Errorf("sdcsim: write certificate: %w", err)
	}

	if s.vmapi, err = s.startHTTP("vmapi"); err != nil {
		return err
	}
	s.routeVMAPI(s.vmapi)
	// The changefeed publisher hooks the server's upgrade event without
	// looking at the path (sdc-apis §2.1): any path upgrades.
	mux := s.vmapi.mux
	s.vmapi.srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if websocket.IsWebSocketUpgrade(r) {
			r.URL.Path = "/changefeeds"
		}
		mux.ServeHTTP(w, r)
	})
	if s.cnapi, err = s.startHTTP("cnapi"); err != nil {
		return err
	}
	s.routeCNAPI(s.cnapi)
	if s.napi, err = s.startHTTP("napi"); err != nil {
		return err
	}
	s.routeNAPI(s.napi)
	s.ldap, err = newLDAPServer(s, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	return err
}

func (s *Sim) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// crash records a request that would have made a real service's process
// exit.
func (s *Sim) crash(what string) {
	s.log.Error("sdcsim: a real service would have exited", "why", what)
	s.crashMu.Lock()
	s.crashes = append(s.crashes, what)
	s.crashMu.Unlock()
}

// Crashes lists the requests that would have made a real service exit.
func (s *Sim) Crashes() []string {
	s.crashMu.Lock()
	defer s.crashMu.Unlock()
	return slices.Clone(s.crashes)
}

// Close stops every service, ends every connection (hanging requests and
// half-open changefeeds included) and removes the temporary certificate.
// It reports any request that would have made a real service exit (see
// Crashes), so a test that closes the simulator fails on it.
func (s *Sim) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, hs := range []*httpService{s.vmapi, s.cnapi, s.napi} {
			if hs != nil {
				_ = hs.srv.Shutdown(ctx)
			}
		}
		if s.feed != nil {
			s.feed.close()
		}
		if s.ldap != nil {
			s.ldap.close()
		}
		if s.tmpDir != "" {
			_ = os.RemoveAll(s.tmpDir)
		}
	})
	if c := s.Crashes(); len(c) > 0 {
		return fmt.Errorf("sdcsim: %d request(s) would have made a real service exit, first: %s", len(c), c[0])
	}
	return nil
}

// VMAPIURL is VMAPI's base URL (the changefeed is on it too).
func (s *Sim) VMAPIURL() string { return s.vmapi.url() }

// CNAPIURL is CNAPI's base URL.
func (s *Sim) CNAPIURL() string { return s.cnapi.url() }

// NAPIURL is NAPI's base URL.
func (s *Sim) NAPIURL() string { return s.napi.url() }

// ChangefeedURL is the WebSocket URL of the changefeed.
func (s *Sim) ChangefeedURL() string { return "ws://" + s.vmapi.ln.Addr().String() + "/changefeeds" }

// LDAPURL is UFDS over plain LDAP.
func (s *Sim) LDAPURL() string {
	s.ldap.mu.Lock()
	defer s.ldap.mu.Unlock()
	return "ldap://" + s.ldap.plainAddr
}

// LDAPSURL is UFDS over LDAPS with the self-signed certificate.
func (s *Sim) LDAPSURL() string {
	s.ldap.mu.Lock()
	defer s.ldap.mu.Unlock()
	return "ldaps://" + s.ldap.tlsAddr
}

// RootDN and RootPassword are the UFDS bind credentials.
func (s *Sim) RootDN() string { return s.opts.RootDN }

// RootPassword is the UFDS root password.
func (s *Sim) RootPassword() string { return s.opts.RootPassword }

// CACertFile is the PEM file of the LDAPS certificate (its own CA).
func (s *Sim) CACertFile() string { return s.certFile }

// CACertPEM is the LDAPS certificate in PEM form.
func (s *Sim) CACertPEM() []byte { return slices.Clone(s.certPEM) }

// ClientTLSConfig is a client configuration that verifies the LDAPS
// certificate.
func (s *Sim) ClientTLSConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.certPEM)
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// Config returns the cns configuration keys that point at the simulator
// (see the package documentation), ready for json.Marshal.
func (s *Sim) Config() map[string]any {
	ufds := s.LDAPSURL()
	if s.opts.PlainLDAPInConfig {
		ufds = s.LDAPURL()
	}
	return map[string]any{
		"vmapi_opts": map[string]any{"address": s.VMAPIURL(), "limit": s.opts.VMAPILimit},
		"cnapi_opts": map[string]any{"address": s.CNAPIURL()},
		"napi_opts":  map[string]any{"address": s.NAPIURL()},
		"ufds_opts": map[string]any{
			"address":      ufds,
			"bindDN":       s.opts.RootDN,
			"bindPassword": s.opts.RootPassword,
			"ca_file":      s.certFile,
		},
		"changefeed_opts": map[string]any{
			"resource":     "vm",
			"subResources": slices.Clone(VMSubResources),
			"instance":     s.opts.Instance,
		},
	}
}
