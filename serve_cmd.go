package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"sync"
	"syscall"
	"time"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/file"
	"github.com/tritondatacenter/cns/feeds/hysteresis"
	"github.com/tritondatacenter/cns/serve"
)

// ServeCmd runs the service.
type ServeCmd struct {
	Config   string `short:"c" required:"" type:"path" help:"Config file: the reference implementation's config.json plus cns's keys."`
	LogLevel string `enum:",trace,debug,info,warn,error" default:"" help:"Log level (overrides log_level in the config)."`
	Check    bool   `help:"Only validate the config file and exit (status 96 when it is invalid)."`
}

// service is a running cns: the store, the DNS server, the updater and its
// feed, the API, and the configuration they were built from.
type service struct {
	path     string
	log      *slog.Logger
	level    *slog.LevelVar
	levelArg string // --log-level, which wins over the config

	mu  sync.Mutex // guards cfg and reloads
	cfg *Config

	store   *db.DB
	dns     *serve.Server
	updater *feeds.Updater
}

// Run serves the db at once, then starts the feeds; it returns when
// SIGINT or SIGTERM arrives, after the commit in progress has landed.
// SIGHUP re-reads the configuration.
func (c *ServeCmd) Run() error {
	level := new(slog.LevelVar)
	log := slog.New(newBunyanHandler(os.Stderr, "cns", level))
	slog.SetDefault(log)
	s := &service{path: c.Config, log: log, level: level, levelArg: c.LogLevel}

	cfg, err := LoadConfig(c.Config)
	if err != nil {
		return err
	}
	if c.Check {
		for _, w := range cfg.Warnings {
			fmt.Fprintln(os.Stderr, "warning:", w)
		}
		fmt.Printf("%s: ok (%d forward zones)\n", c.Config, len(cfg.Forward))
		return nil
	}
	s.cfg = cfg
	s.applyLogLevel(cfg)
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return s.run(ctx)
}

func (s *service) applyLogLevel(cfg *Config) {
	name := cfg.LogLevel
	if s.levelArg != "" {
		name = s.levelArg
	}
	l, err := parseLogLevel(name)
	if err != nil {
		s.log.Warn("log level", "err", err)
		return
	}
	s.level.Set(l)
}

func (s *service) run(ctx context.Context) error {
	cfg, log := s.cfg, s.log
	started := time.Now()
	if err := os.MkdirAll(filepath.Dir(cfg.DBPath), 0o700); err != nil {
		return fmt.Errorf("db directory: %w", err)
	}
	store, err := db.Open(cfg.DBPath, cfg.DBOptions())
	var readOnly error // why the db is open read-only
	if errors.Is(err, syscall.EROFS) {
		// A file system gone read-only (a failing disk, a full pool that
		// ZFS froze) must not take the names away: serve what the db
		// holds. Commits fail, so the db shows degraded in /feeds and
		// cnsadm status until the file system is writable and cns restarts.
		opts := cfg.DBOptions()
		opts.ReadOnly = true
		if store, err = db.Open(cfg.DBPath, opts); err == nil {
			readOnly = fmt.Errorf("%s is on a read-only file system: serving what it holds; no change is stored until it is writable and cns is restarted", cfg.DBPath)
			log.Error(readOnly.Error())
		}
	}
	if err != nil {
		return err
	}
	defer store.Close()
	s.store = store

	hostname, _ := os.Hostname()
	identity := hostname
	if cfg.HideIdentity {
		identity = ""
	}
	version := versionString()
	if cfg.HideVersion {
		version = ""
	}
	// Serve at once with the addresses the config spells out; peer names
	// are looked up in the background.
	srv, err := serve.New(serve.Config{Listen: cfg.DNSListen, Version: version, Identity: identity, Logger: log,
		Access: transferAccess(ctx, cfg, log, false), RRL: cfg.RRL, Forwarding: cfg.Forwarding, Propagation: cfg.Propagation}, store)
	if err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	defer srv.Close()
	s.dns = srv
	log.Info("serving from the db", "db", cfg.DBPath, "took", time.Since(started).String())

	u, err := feeds.NewUpdater(store, feeds.Options{Records: cfg.RecordsConfig(), Zones: cfg.ZoneConfig(), BatchWindow: cfg.BatchWindow, Logger: log,
		Hysteresis: hysteresis.Policy{Window: cfg.HysteresisWindow, LastMemberDelay: cfg.HysteresisLastMemberDelay}})
	if err != nil {
		return err
	}
	s.updater = u
	if readOnly != nil {
		u.ReportFeed(feeds.StoreFeed, readOnly)
	}

	var api net.Listener
	if cfg.APIListen != "" {
		if api, err = net.Listen("tcp", cfg.APIListen); err != nil {
			return fmt.Errorf("api_server.listen %s: %w", cfg.APIListen, err)
		}
		log.Info("API listening", "addr", api.Addr().String())
	}

	var wg sync.WaitGroup
	wg.Go(func() { srv.Run(ctx) })
	wg.Go(func() { s.resolvePeers(ctx) })
	wg.Go(func() {
		t := time.Now()
		if err := srv.Warm(); err != nil {
			log.Error("zones stay served from the db", "err", err)
			return
		}
		log.Info("zones loaded into memory", "took", time.Since(t).String())
	})
	if api != nil {
		as := &admin.Server{Store: store, DNS: srv, Updater: u, Version: versionString(), Token: cfg.APIToken,
			ReadToken: cfg.APIReadToken, Reload: s.reload, Log: log}
		wg.Go(func() {
			if err := as.Serve(ctx, api); err != nil {
				log.Error("API stopped", "err", err)
			}
		})
	}
	wg.Go(func() { u.Run(ctx) })
	if cfg.InventoryFile != "" {
		f := &file.Feed{Path: cfg.InventoryFile, Sink: u, Logger: log}
		wg.Go(func() { f.Run(ctx) })
	} else {
		f, err := newSDCFeed(cfg, u, log)
		if err != nil {
			return err
		}
		wg.Go(func() { f.Run(ctx) })
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-hup:
			if err := s.reload(); err != nil {
				log.Error("configuration not reloaded; keeping the running one", "file", s.path, "err", err)
			}
			continue
		case <-ctx.Done():
		}
		break
	}
	log.Info("shutting down")
	srv.Close()
	wg.Wait()
	// The updater has stopped: a commit in progress has landed. Close the
	// store before returning so the file is released cleanly.
	return nil
}

// resolvePeers looks peer names up now and every peerResolveInterval.
func (s *service) resolvePeers(ctx context.Context) {
	for {
		s.mu.Lock()
		cfg := s.cfg
		s.mu.Unlock()
		if err := s.dns.SetAccess(transferAccess(ctx, cfg, s.log, true)); err != nil {
			s.log.Error("transfer policy", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(peerResolveInterval):
		}
	}
}

// reload re-reads the config file and applies what can change while
// running: zones and naming, peers, transfer ACL, TSIG keys, NOTIFY
// interval, log level. A config that does not validate changes nothing.
// Settings that need a restart (db_path, dns_listen, api_server, the
// feed) are reported and left as they are.
func (s *service) reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next, err := LoadConfig(s.path)
	if err != nil {
		return err
	}
	access := transferAccess(context.Background(), next, s.log, true)
	if err := s.dns.SetAccess(access); err != nil {
		return err
	}
	s.dns.SetRRL(next.RRL)
	old := s.cfg
	for _, w := range next.Warnings {
		s.log.Warn(w)
	}
	var needRestart []string
	for key, same := range map[string]bool{
		"db_path":        old.DBPath == next.DBPath,
		"dns_listen":     reflect.DeepEqual(old.DNSListen, next.DNSListen),
		"api_server":     old.APIListen == next.APIListen && old.APIToken == next.APIToken && old.APIReadToken == next.APIReadToken,
		"inventory_file": old.InventoryFile == next.InventoryFile,
		"sdc options":    sameJSON(old.VMAPI, next.VMAPI) && sameJSON(old.CNAPI, next.CNAPI) && sameJSON(old.NAPI, next.NAPI) && sameJSON(old.UFDS, next.UFDS) && sameJSON(old.Changefeed, next.Changefeed),
		"journal limits": old.Journal == next.Journal && old.MaxRRset == next.MaxRRset,
		"forwarding":     reflect.DeepEqual(old.Forwarding, next.Forwarding),
		"hysteresis":     old.HysteresisWindow == next.HysteresisWindow && old.HysteresisLastMemberDelay == next.HysteresisLastMemberDelay,
	} {
		if !same {
			needRestart = append(needRestart, key)
		}
	}
	if !reflect.DeepEqual(old.RecordsConfig(), next.RecordsConfig()) || !reflect.DeepEqual(old.ZoneConfig(), next.ZoneConfig()) {
		s.updater.SetConfig(next.RecordsConfig(), next.ZoneConfig())
	}
	s.cfg = next
	s.applyLogLevel(next)
	if len(needRestart) > 0 {
		s.log.Warn("configuration reloaded; these settings take effect at the next restart", "settings", needRestart)
		return nil
	}
	s.log.Info("configuration reloaded", "file", s.path)
	return nil
}

// sameJSON compares two JSON values by meaning, not spelling.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	json.Unmarshal(a, &x)
	json.Unmarshal(b, &y)
	return reflect.DeepEqual(x, y)
}
