package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
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
	atLeastTwoProcs()
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

// atLeastTwoProcs lets cns run Go code on two threads even where Go's
// default would be one (an affinity mask or a cgroup quota of one CPU),
// unless GOMAXPROCS is set. With one P, a commit of a few hundred VMs
// holds it for tens of ms and every answer waits behind it (the runtime
// preempts a running goroutine only every 10 ms); with two, the reader of
// the UDP sockets has a P of its own and the kernel's scheduler switches
// to its thread as soon as a query arrives, in the middle of a commit.
func atLeastTwoProcs() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
}
