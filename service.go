package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/db/durable"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/aggregate"
	"github.com/tritondatacenter/cns/feeds/file"
	"github.com/tritondatacenter/cns/feeds/sdc"
	"github.com/tritondatacenter/cns/serve"
	"github.com/tritondatacenter/cns/smf"
)

// service is a running cns: the store, the DNS server, the updater and its
// feed, the API, and the configuration they were built from. It is the
// one wiring of the program: `cns serve` and every whole-program test
// build it with newService.
type service struct {
	path string
	logging

	reloading sync.Mutex // one reload (or look-up of the peers' names) at a time
	mu        sync.Mutex // guards cfg
	cfg       *config.Config

	store   *db.DB
	dns     *serve.Server
	updater *feeds.Updater
	feed    interface{ Run(context.Context) error } // nil: a standalone aggregator
	agg     *aggregate.Aggregator                   // follows nothing without an aggregate key
	api     *admin.Server
	apiLns  []net.Listener

	// restart, when set (by cns serve), is called by a reload that finds
	// a setting changed that only a start applies; cns serve then starts
	// itself again. Unset (the in-process tests), such a setting waits for
	// the next start. It must not block.
	restart func(settings []string)

	wg sync.WaitGroup // every goroutine start launched
}

// logging is the service's logger and its level: the config's log_level,
// unless --log-level (levelArg) says otherwise. level may be nil (tests).
type logging struct {
	log      *slog.Logger
	level    *slog.LevelVar
	levelArg string
}

// serviceTuning is what whole-program tests may change beyond the config:
// timings too slow for a test (poll intervals, the updater's clock). cns
// serve uses the zero value.
type serviceTuning struct {
	Updater   func(*feeds.Options)
	SDC       func(*sdc.Config)
	Aggregate func(*aggregate.Options)
}

// newService builds everything the config asks for and starts listening
// (DNS and API), so that the db is served as soon as start is called. On
// error, whatever was opened is closed again.
func newService(path string, cfg *config.Config, logs logging, tune serviceTuning) (_ *service, err error) {
	s := &service{path: path, cfg: cfg, logging: logs}
	log := s.log
	s.applyLogLevel(cfg.LogLevel)
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	started := time.Now()
	readOnly, err := s.openStore()
	if err != nil {
		return nil, err
	}
	hostname, _ := os.Hostname()
	identity := hostname
	if cfg.HideIdentity {
		identity = ""
	}
	version, meta := versionString(), metaVersionString()
	if cfg.HideVersion {
		version, meta = "", ""
	}
	// The updater reads the stored VMs in Run, which start calls once the
	// tables are built.
	uo := feeds.Options{Records: cfg.RecordsConfig(), Zones: cfg.ZoneConfig(), BatchWindow: cfg.BatchWindow, Hysteresis: cfg.Hysteresis, Guard: cfg.Guard,
		Logger: log, LoadLater: true, HeapLimit: smf.HeapLimit()}
	if tune.Updater != nil {
		tune.Updater(&uo)
	}
	if s.updater, err = feeds.NewUpdater(s.store, uo); err != nil {
		return nil, err
	}
	if readOnly != nil {
		s.updater.ReportFeed(feeds.StoreFeed, readOnly)
	}
	// The aggregator exists before the DNS server listens: a source's
	// NOTIFY may come in the first packet. Its stored copies are read
	// once cns answers.
	ao := aggregate.Options{Regions: cfg.Aggregate, Store: s.store, Sink: s.updater, Logger: log}
	if tune.Aggregate != nil {
		tune.Aggregate(&ao)
	}
	s.agg = aggregate.New(ao)

	// Serve at once with the addresses the config spells out; peer names
	// are looked up in the background.
	s.dns, err = serve.New(serve.Config{Listen: cfg.DNSListen, Version: version, MetaVersion: meta, Identity: identity, Logger: log,
		Access: serve.ResolveTransfers(context.Background(), cfg.Transfers(), log, false), RRL: cfg.RRL, Forwarding: cfg.Forwarding,
		Propagation: cfg.Propagation, Signers: cfg.Signers, Notified: s.agg.Notified, ClientAnswers: cfg.ClientAnswers}, s.store)
	if err != nil {
		return nil, err
	}
	if err := s.dns.Listen(); err != nil {
		return nil, err
	}
	log.Info("serving from the db", "db", cfg.DBPath, "took", time.Since(started).String())

	if err := s.listenAPI(); err != nil {
		return nil, err
	}
	if len(s.apiLns) > 0 {
		s.api = &admin.Server{Store: s.store, DNS: s.dns, Updater: s.updater, Version: versionString(),
			Token: cfg.APIToken, ReadToken: cfg.APIReadToken, Reload: s.reload, Log: log}
	}

	// Even without aggregate: sources the db still holds from an earlier
	// config are forgotten, their records leave.
	if err := s.agg.Load(); err != nil {
		return nil, err
	}
	if s.api != nil && len(cfg.Aggregate) > 0 {
		s.api.Sources = s.agg.Status
	}
	if cfg.Standalone() {
		log.Info("standalone aggregator: no data center feed", "regions", len(cfg.Aggregate))
	} else if cfg.InventoryFile != "" {
		s.feed = &file.Feed{Path: cfg.InventoryFile, Sink: s.updater, Logger: log}
	} else {
		sc := cfg.SDC
		sc.Logger = log
		if tune.SDC != nil {
			tune.SDC(&sc)
		}
		f, err := sdc.NewFeed(sc, s.updater)
		if err != nil {
			return nil, err
		}
		s.feed = f
		if s.api != nil {
			s.api.Changefeed = f.DelayHistogram
			s.api.Directory = f
		}
	}
	return s, nil
}

// listenAPI opens the API's listeners. An address the config names must
// open, or cns does not start; of the reference's default listeners, one
// that cannot open (no ::1, port 80 taken) is logged and the rest serve.
func (s *service) listenAPI() error {
	addrs, err := apiAddresses(s.cfg, smf.ZoneMetadata.AdminAddrs)
	explicit := s.cfg.APIListen != nil
	if err != nil {
		s.log.Info("API on loopback only", "reason", err.Error())
	}
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			if explicit {
				return fmt.Errorf("api_server.listen %s: %w", a, err)
			}
			s.log.Error("API cannot listen here; set api_server.listen to choose", "addr", a, "err", err)
			continue
		}
		s.log.Info("API listening", "addr", ln.Addr().String())
		s.apiLns = append(s.apiLns, ln)
	}
	if !explicit && len(s.apiLns) == 0 {
		s.log.Error("no API: none of the default listeners opened; CloudAPI and cnsadm cannot reach cns", "tried", addrs)
	}
	return nil
}

// openStore opens the db. A file system gone read-only (a failing disk, a
// full pool that ZFS froze) must not take the names away: the db is then
// opened read-only and served; commits fail, so the db shows degraded in
// /feeds and cnsadm status until the file system is writable and cns
// restarts. The returned error says so.
func (s *service) openStore() (readOnly error, err error) {
	cfg := s.cfg
	// Durably: the db file is synced into its directory when created,
	// and that directory must itself survive a power cut.
	if err := durable.MkdirAll(filepath.Dir(cfg.DBPath), 0o700); err != nil {
		return nil, fmt.Errorf("db directory: %w", err)
	}
	opts := cfg.DBOptions()
	opts.UpgradeVMMeta = feeds.UpgradeVMMeta // an older file's VM facts in today's encoding
	s.store, err = db.Open(cfg.DBPath, opts)
	if errors.Is(err, syscall.EROFS) {
		opts.ReadOnly = true
		if s.store, err = db.Open(cfg.DBPath, opts); err == nil {
			readOnly = fmt.Errorf("%s is on a read-only file system: serving what it holds; no change is stored until it is writable and cns is restarted", cfg.DBPath)
			s.log.Error(readOnly.Error())
		}
	}
	return readOnly, err
}

// start runs every part until ctx ends; stop waits for them.
func (s *service) start(ctx context.Context) {
	log := s.log
	s.wg.Go(func() { s.dns.Run(ctx) })
	s.wg.Go(func() { s.resolvePeers(ctx) })
	for _, ln := range s.apiLns {
		s.wg.Go(func() {
			if err := s.api.Serve(ctx, ln); err != nil {
				log.Error("API stopped", "addr", ln.Addr().String(), "err", err)
			}
		})
	}
	// What follows a restart reads the whole file (the warm-up, a transfer
	// sent from the store, the updater's read of the stored VMs): in case
	// the page cache does not hold it (a reboot), it is read ahead in
	// large reads instead of a page per fault.
	s.wg.Go(func() {
		if err := s.store.ReadAhead(); err != nil {
			log.Debug("read ahead of the db", "err", err)
		}
	})
	// The feeds start once the tables are built. Both are CPU-bound: the
	// warm-up, and the updater's read of every stored VM and the feeds'
	// reconcile that follow; at a million VMs, on one CPU, running them
	// side by side only delays the tables (and the transfers that wait for
	// them). What changed while cns was down waits the few seconds more.
	s.wg.Go(func() {
		t := time.Now()
		if err := s.dns.Warm(); err != nil {
			log.Error("zones stay served from the db", "err", err)
		} else {
			log.Info("zones loaded into memory", "took", time.Since(t).String())
		}
		s.wg.Go(func() { s.updater.Run(ctx) })
		if s.feed != nil {
			s.wg.Go(func() { s.feed.Run(ctx) })
		}
		s.wg.Go(func() { s.agg.Run(ctx) })
	})
}

// stop waits, once ctx given to start has ended, for every part to stop
// (the commit in progress lands first), then closes the DNS server and the
// store so the file is released cleanly.
func (s *service) stop() {
	s.log.Info("shutting down")
	if s.dns != nil {
		// Closing the sockets ends the DNS server's reads at once.
		s.dns.Close()
	}
	s.wg.Wait()
	s.close()
}

// close releases what newService opened.
func (s *service) close() {
	for _, ln := range s.apiLns {
		ln.Close() // the API server closes it too; twice is harmless
	}
	if s.dns != nil {
		s.dns.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
}
