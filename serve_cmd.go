package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/smf"
)

// ServeCmd runs the service.
type ServeCmd struct {
	Config   string `short:"c" required:"" type:"path" help:"Config file: the reference implementation's config.json plus cns's keys."`
	LogLevel string `enum:",trace,debug,info,warn,error" default:"" help:"Log level (overrides log_level in the config)."`
	Check    bool   `help:"Only validate the config file and exit (status 96 when it is invalid)."`
}

// Run serves the db at once, then starts the feeds; it returns when
// SIGINT or SIGTERM arrives, after the commit in progress has landed.
// SIGHUP re-reads the configuration; when it changed a setting only a
// start applies, cns stops as for SIGTERM and starts again (restart).
func (c *ServeCmd) Run() error {
	level := new(slog.LevelVar)
	log := slog.New(smf.NewBunyanHandler(os.Stderr, "cns", level))
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
	smf.SetMemoryLimit(log)
	s, err := newService(c.Config, cfg, logging{log: log, level: level, levelArg: c.LogLevel}, serviceTuning{})
	if err != nil {
		return err
	}
	restart := make(chan []string, 1)
	s.restart = func(settings []string) {
		select {
		case restart <- settings:
		default: // one restart is on its way; it reads the file anew
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
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
		case settings := <-restart:
			cancel()
			s.stop()
			return reexec(log, settings)
		case <-ctx.Done():
		}
		break
	}
	s.stop()
	return nil
}

// reexec starts cns again in this process: the same binary, arguments and
// environment, so the process stays the one SMF's contract and systemd
// watch (the PID does not change), and the new start reads the config
// file and opens the db that stop closed. It returns only when the exec
// fails; cns then exits non-zero, which both restarters follow with a
// start (SMF restarts a contract service whose processes all exited; the
// systemd unit has Restart=on-failure).
func reexec(log *slog.Logger, settings []string) error {
	exe, err := os.Executable()
	if err == nil {
		log.Info("restarting", "settings", settings, "exec", exe)
		err = syscall.Exec(exe, os.Args, os.Environ())
	}
	return fmt.Errorf("restart to apply %s: %w; exiting for the service manager to start cns again", strings.Join(settings, ", "), err)
}
