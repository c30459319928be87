package main

import (
	"context"
	"os"
	"reflect"
	"time"

	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/records"
	"github.com/tritondatacenter/cns/serve"
	"github.com/tritondatacenter/cns/serve/policy"
)

// A reload hands each part of cns that applies its section while running
// (a subscriber) its new section, when it differs from the running one.
// The key table says which keys a reload applies (Restart false); each
// of those reaches a subscriber's section (TestReloadableKeysReachASubscriber)
// and each is applied by a running cns (TestReloadAppliesEveryKey). A
// change to any other key restarts cns.

// subscriber is one part of cns that applies its section at a reload.
type subscriber struct {
	name    string
	changed func(old, next *config.Config) bool
	apply   func(next *config.Config) error
}

// subscribe makes the subscriber that applies the section returned by
// section.
func subscribe[S any](name string, section func(*config.Config) S, apply func(S) error) subscriber {
	return subscriber{name: name,
		changed: func(old, next *config.Config) bool { return !reflect.DeepEqual(section(old), section(next)) },
		apply:   func(next *config.Config) error { return apply(section(next)) }}
}

// names is the updater's section: how names and records are made, and
// every zone's apex.
type names struct {
	records records.Config
	zones   db.ZoneConfig
}

// subscribers are the parts a reload hands their sections, in the order
// they apply them: the transfer policy first, the one the DNS server may
// refuse (then nothing changes).
func (s *service) subscribers() []subscriber {
	return []subscriber{
		subscribe("transfers", (*config.Config).Transfers, func(t policy.Transfers) error {
			// Peer names are looked up before anything changes; a slow
			// resolver holds up this reload only.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return s.dns.SetAccess(serve.ResolveTransfers(ctx, t, s.log, true))
		}),
		subscribe("rrl", func(c *config.Config) policy.RRL { return c.RRL }, func(r policy.RRL) error {
			s.dns.SetRRL(r)
			return nil
		}),
		subscribe("names", func(c *config.Config) names { return names{c.RecordsConfig(), c.ZoneConfig()} }, func(n names) error {
			s.updater.SetConfig(n.records, n.zones)
			return nil
		}),
		subscribe("log level", func(c *config.Config) string { return c.LogLevel }, func(level string) error {
			s.applyLogLevel(level)
			return nil
		}),
	}
}

// reload re-reads the config file and hands each subscriber its changed
// section. A config that does not validate changes nothing. When a key
// only a start applies changed (the key table's Restart: db_path,
// dns_listen, api_server, the feed's keys, ...), cns restarts (see
// restart): a SAPI change, which config-agent follows with a refresh,
// always takes effect.
func (s *service) reload() error {
	s.reloading.Lock()
	defer s.reloading.Unlock()
	next, err := config.Load(s.path)
	if err != nil {
		return err
	}
	old := s.config()
	for _, sub := range s.subscribers() {
		if sub.changed(old, next) {
			if err := sub.apply(next); err != nil {
				return err
			}
		}
	}
	for _, w := range next.Warnings {
		s.log.Warn(w)
	}
	s.mu.Lock()
	s.cfg = next
	s.mu.Unlock()
	_, needRestart := config.Diff(old, next)
	switch {
	case len(needRestart) > 0 && s.restart != nil:
		s.log.Warn("configuration reloaded; restarting to apply settings only a start applies", "settings", needRestart)
		s.restart(needRestart)
		return nil
	case len(needRestart) > 0:
		s.log.Warn("configuration reloaded; these settings take effect at the next restart", "settings", needRestart)
		return nil
	}
	s.log.Info("configuration reloaded", "file", s.path)
	return nil
}

// config is the configuration the service runs.
func (s *service) config() *config.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// resolvePeers looks the peers' names up now and every
// serve.PeerResolveInterval, so a secondary that moves keeps its access
// and its NOTIFYs. It holds the reload lock: a look-up of the running
// configuration's names must not land after a reload's.
func (s *service) resolvePeers(ctx context.Context) {
	for {
		s.reloading.Lock()
		err := s.dns.SetAccess(serve.ResolveTransfers(ctx, s.config().Transfers(), s.log, true))
		s.reloading.Unlock()
		if err != nil {
			s.log.Error("transfer policy", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(serve.PeerResolveInterval):
		}
	}
}

// applyLogLevel sets the log level: log_level (name), else the
// LOGLEVEL environment variable the reference's SMF manifest sets, unless
// cns serve --log-level says otherwise.
func (s *service) applyLogLevel(name string) {
	if s.level == nil {
		return
	}
	if name == "" {
		name = os.Getenv("LOGLEVEL")
	}
	if s.levelArg != "" {
		name = s.levelArg
	}
	l, err := config.ParseLogLevel(name)
	if err != nil {
		s.log.Warn("log level", "err", err)
		return
	}
	s.level.Set(l)
}
