package config

import (
	"errors"
	"time"

	"github.com/tritondatacenter/cns/feeds/guard"
	"github.com/tritondatacenter/cns/feeds/hysteresis"
	"github.com/tritondatacenter/cns/feeds/sdc"
)

// Feeds is the section of that name: where truth comes from (the SDC
// APIs, or an inventory file instead) and how the updater takes it in.
// Only a start applies it.
type Feeds struct {
	// InventoryFile, when set, is the feed instead of the SDC APIs.
	InventoryFile string
	// SDC is the SDC feed's configuration: the *_opts keys, parsed once
	// by the feed's own rules (sdc.ParseEndpoints), and its poll
	// intervals (full_poll_interval raised to the feed's floor). Only
	// the file's keys are set: the caller adds the logger.
	SDC sdc.Config
	// BatchWindow is how long changes gather into one commit
	// (batch_window_ms, default 25 ms).
	BatchWindow time.Duration
	// Hysteresis is RFD 1's self-removal numbers (hysteresis_window_ms,
	// hysteresis_last_member_delay_ms; zero: the defaults).
	Hysteresis hysteresis.Policy
	// Guard is the guard on mass removals (removal_guard_window_ms,
	// _min_vms, _percent, _confirm_ms; a zero duration: the default).
	Guard guard.Policy

	sdcConfigured bool // some *_opts key is set (Standalone)
}

// defaultFeeds is what an absent key of the section means.
func defaultFeeds() Feeds {
	return Feeds{SDC: sdc.Config{FullPollInterval: sdc.ServeFullPollInterval(0)},
		Guard: guard.Policy{MinVMs: guard.DefaultMinVMs, Percent: guard.DefaultPercent}}
}

// parseSDCOption returns the parse function of one *_opts key: a JSON
// object (parseInventoryFile reads them all, once the feed is known).
func parseSDCOption(key string) func(*parser) error {
	return func(p *parser) error {
		var obj map[string]any
		ok, err := p.get(key, &obj)
		p.c.sdcConfigured = p.c.sdcConfigured || ok
		return err
	}
}

// parseFullPollInterval reads full_poll_interval, raised to the SDC
// feed's floor: the changefeed carries the changes, a full listing is a
// safety net (the reference's 10 s would list 100k VMs six times a
// minute).
func parseFullPollInterval(p *parser) error {
	var d time.Duration
	if err := p.millis("full_poll_interval", &d, 0, "must not be negative"); err != nil {
		return err
	}
	p.c.SDC.FullPollInterval = sdc.ServeFullPollInterval(d)
	return nil
}

// parseInventoryFile runs after the *_opts keys: without an inventory
// file the SDC feed is used, so its keys must be usable.
func parseInventoryFile(p *parser) error {
	c := p.c
	if err := p.getInto("inventory_file", &c.InventoryFile); err != nil || c.InventoryFile != "" {
		return err
	}
	if _, agg := p.top["aggregate"]; agg && len(c.Forward) == 0 && !c.sdcConfigured {
		return nil // a standalone aggregator (parseAggregate checks it)
	}
	ep, err := sdc.ParseEndpoints(p.top["vmapi_opts"], p.top["cnapi_opts"], p.top["napi_opts"], p.top["ufds_opts"], p.top["changefeed_opts"])
	if err != nil {
		var oe *sdc.OptionError
		if errors.As(err, &oe) {
			return p.bad(oe.Key, "%s", oe.Problem)
		}
		return p.bad("", "%v", err)
	}
	c.SDC.Endpoints = ep
	return nil
}

func parseRemovalGuardMinVMs(p *parser) error {
	if ok, err := p.get("removal_guard_min_vms", &p.c.Guard.MinVMs); err != nil {
		return err
	} else if ok && p.c.Guard.MinVMs < 1 {
		return p.bad("removal_guard_min_vms", "must be at least 1")
	}
	return nil
}

func parseRemovalGuardPercent(p *parser) error {
	if ok, err := p.get("removal_guard_percent", &p.c.Guard.Percent); err != nil {
		return err
	} else if ok && (p.c.Guard.Percent < 1 || p.c.Guard.Percent > 100) {
		return p.bad("removal_guard_percent", "must be between 1 and 100")
	}
	return nil
}
