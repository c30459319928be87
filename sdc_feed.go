package main

import (
	"log/slog"

	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/sdc"
)

// newSDCFeed builds the SDC feed from the reference's *_opts keys (which
// config.Load has already checked) and its poll intervals.
//
// tune, when not nil, adjusts the feed's timings (whole-program tests).
func newSDCFeed(cfg *config.Config, u *feeds.Updater, log *slog.Logger, tune func(*sdc.Config)) (*sdc.Feed, error) {
	ep, err := sdc.ParseEndpoints(cfg.VMAPI, cfg.CNAPI, cfg.NAPI, cfg.UFDS, cfg.Changefeed)
	if err != nil {
		return nil, &config.Error{File: cfg.Path, Problem: err.Error()}
	}
	full := sdc.ServeFullPollInterval(cfg.FullPollInterval)
	if cfg.FullPollInterval != 0 && full != cfg.FullPollInterval {
		log.Info("full_poll_interval raised to its floor: the changefeed carries changes, full listings are a safety net",
			"configured", cfg.FullPollInterval.String(), "used", full.String())
	}
	fc := sdc.Config{
		Endpoints:        ep,
		FullPollInterval: full,
		ReaperInterval:   cfg.ReaperPollInterval,
		Logger:           log,
	}
	if tune != nil {
		tune(&fc)
	}
	return sdc.NewFeed(fc, u)
}
