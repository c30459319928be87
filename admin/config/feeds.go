package config

import (
	"encoding/json"
	"errors"

	"github.com/tritondatacenter/cns/feeds/sdc"
)

// The feeds: the SDC APIs' *_opts (kept as given for the SDC feed), or an
// inventory file instead.

// sdcOptions are the *_opts keys and where each is kept.
func sdcOptions(c *Config) map[string]*json.RawMessage {
	return map[string]*json.RawMessage{"vmapi_opts": &c.VMAPI, "cnapi_opts": &c.CNAPI, "napi_opts": &c.NAPI, "ufds_opts": &c.UFDS, "changefeed_opts": &c.Changefeed}
}

// parseSDCOption returns the parse function of one *_opts key: a JSON
// object, kept as written.
func parseSDCOption(key string) func(*parser) error {
	return func(p *parser) error {
		var obj map[string]any
		if ok, err := p.get(key, &obj); err != nil || !ok {
			return err
		}
		*sdcOptions(p.c)[key] = p.top[key]
		return nil
	}
}

// parseInventoryFile runs after the *_opts keys: without an inventory
// file the SDC feed is used, so its keys must be usable.
func parseInventoryFile(p *parser) error {
	c := p.c
	if err := p.getInto("inventory_file", &c.InventoryFile); err != nil || c.InventoryFile != "" {
		return err
	}
	if _, agg := p.top["aggregate"]; agg && len(c.Forward) == 0 &&
		len(c.VMAPI)+len(c.CNAPI)+len(c.NAPI)+len(c.UFDS)+len(c.Changefeed) == 0 {
		return nil // a standalone aggregator (parseAggregate checks it)
	}
	if _, err := sdc.ParseEndpoints(c.VMAPI, c.CNAPI, c.NAPI, c.UFDS, c.Changefeed); err != nil {
		var oe *sdc.OptionError
		if errors.As(err, &oe) {
			return p.bad(oe.Key, "%s", oe.Problem)
		}
		return p.bad("", "%v", err)
	}
	return nil
}
