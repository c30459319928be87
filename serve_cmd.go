package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/file"
	"github.com/tritondatacenter/cns/serve"
)

// ServeCmd runs the service.
type ServeCmd struct {
	Config   string `short:"c" required:"" type:"path" help:"Config file: the reference implementation's config.json plus cns's keys."`
	LogLevel string `default:"info" enum:"trace,debug,info,warn,error" help:"Log level (${enum})."`
}

// Run serves the db at once, then starts the feeds; it returns when
// SIGINT or SIGTERM arrives, after the commit in progress has landed.
func (c *ServeCmd) Run() error {
	level := new(slog.LevelVar)
	l, _ := parseLogLevel(c.LogLevel)
	level.Set(l)
	log := slog.New(newBunyanHandler(os.Stderr, "cns", level))
	slog.SetDefault(log)

	cfg, err := LoadConfig(c.Config)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}

	started := time.Now()
	if err := os.MkdirAll(filepath.Dir(cfg.DBPath), 0o700); err != nil {
		return fmt.Errorf("db directory: %w", err)
	}
	store, err := db.Open(cfg.DBPath, cfg.DBOptions())
	if err != nil {
		return err
	}
	defer store.Close()

	hostname, _ := os.Hostname()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Serve at once with the addresses the config spells out; peer names
	// are looked up in the background.
	srv, err := serve.New(serve.Config{Listen: cfg.DNSListen, Version: versionString(), Identity: hostname, Logger: log,
		Access: transferAccess(ctx, cfg, log, false)}, store)
	if err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	defer srv.Close()
	log.Info("serving from the db", "db", cfg.DBPath, "took", time.Since(started).String())

	var wg sync.WaitGroup
	wg.Go(func() { srv.Run(ctx) })
	wg.Go(func() {
		for {
			if err := srv.SetAccess(transferAccess(ctx, cfg, log, true)); err != nil {
				log.Error("transfer policy", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(peerResolveInterval):
			}
		}
	})
	wg.Go(func() {
		t := time.Now()
		if err := srv.Warm(); err != nil {
			log.Error("zones stay served from the db", "err", err)
			return
		}
		log.Info("zones loaded into memory", "took", time.Since(t).String())
	})

	u, err := feeds.NewUpdater(store, feeds.Options{Records: cfg.RecordsConfig(), Zones: cfg.ZoneConfig(), BatchWindow: cfg.BatchWindow, Logger: log})
	if err != nil {
		return err
	}
	wg.Go(func() { u.Run(ctx) })
	if cfg.InventoryFile != "" {
		f := &file.Feed{Path: cfg.InventoryFile, Updater: u, Logger: log}
		wg.Go(func() { f.Run(ctx) })
	} else {
		f, err := newSDCFeed(cfg, u, log)
		if err != nil {
			return err
		}
		wg.Go(func() { f.Run(ctx) })
	}

	<-ctx.Done()
	log.Info("shutting down")
	srv.Close()
	wg.Wait()
	return nil
}
