package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/tritondatacenter/cns/admin/config"
)

// ServeCmd runs the service.
type ServeCmd struct {
	Config   string `short:"c" required:"" type:"path" help:"Config file: the reference implementation's config.json plus cns's keys."`
	LogLevel string `enum:",trace,debug,info,warn,error" default:"" help:"Log level (overrides log_level in the config)."`
	Check    bool   `help:"Only validate the config file and exit (status 96 when it is invalid)."`
}

// Run serves the db at once, then starts the feeds; it returns when
// SIGINT or SIGTERM arrives, after the commit in progress has landed.
// SIGHUP re-reads the configuration.
func (c *ServeCmd) Run() error {
	level := new(slog.LevelVar)
	log := slog.New(newBunyanHandler(os.Stderr, "cns", level))
	slog.SetDefault(log)

	cfg, err := config.Load(c.Config)
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
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	s, err := newService(c.Config, cfg, logging{log: log, level: level, levelArg: c.LogLevel}, serviceTuning{})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s.start(ctx)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-hup:
			if err := s.reload(); err != nil {
				log.Error("configuration not reloaded; keeping the running one", "file", c.Config, "err", err)
			}
			continue
		case <-ctx.Done():
		}
		break
	}
	s.stop()
	return nil
}
