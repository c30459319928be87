package config

import (
	"encoding/json"
	"slices"
	"testing"
)

// Diff names what changed, and which of it needs a restart.
func TestDiff(t *testing.T) {
	parse := func(edit func(m map[string]any)) *Config {
		var m map[string]any
		json.Unmarshal([]byte(referenceConfig), &m)
		edit(m)
		data, _ := json.Marshal(m)
		c, err := Parse(data, "cfg.json")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := parse(func(map[string]any) {})
	for _, tc := range []struct {
		name             string
		edit             func(m map[string]any)
		changed, restart []string
	}{
		{"nothing", func(map[string]any) {}, nil, nil},
		{"same options spelled differently", func(m map[string]any) {
			m["vmapi_opts"] = map[string]any{"limit": 500, "address": "vmapi.coal.joyent.us"}
		}, nil, nil},
		{"reloadable", func(m map[string]any) { m["use_login"] = true; m["allow_transfer"] = []string{"10.0.0.1"} },
			[]string{"allow_transfer", "use_login"}, nil},
		{"restart", func(m map[string]any) { m["db_path"] = "/tmp/x.db"; m["max_rrset"] = 50; m["log_level"] = "debug" },
			[]string{"db_path", "log_level", "max_rrset"}, []string{"db_path", "max_rrset"}},
		{"feed", func(m map[string]any) { m["ufds_opts"] = map[string]any{"address": "ufds2"} },
			[]string{"ufds_opts"}, []string{"ufds_opts"}},
		{"api token", func(m map[string]any) { m["api_server"] = map[string]any{"token": "t"} },
			[]string{"api_server"}, []string{"api_server"}},
	} {
		changed, restart := Diff(old, parse(tc.edit))
		slices.Sort(changed)
		slices.Sort(restart)
		if !slices.Equal(changed, tc.changed) || !slices.Equal(restart, tc.restart) {
			t.Errorf("%s: changed %q restart %q, want %q %q", tc.name, changed, restart, tc.changed, tc.restart)
		}
	}
}

// Every key the table lists is compared by Diff, and classified by its
// Restart: a change to a key only a start applies restarts cns (the
// root's TestReloadRestartsForStartOnlySettings sees it do so), a change
// to any other is a reload's (TestReloadAppliesEveryKey applies each).
func TestEveryKeyIsCompared(t *testing.T) {
	another := map[string]any{
		"my_name": "ns2.coal.joyent.us", "hostmaster": "dns@joyent.us",
		"forward_zones": map[string]any{"other.example.org": map[string]any{"networks": []any{"*"}}},
		"reverse_zones": map[string]any{"peers": []any{"10.0.0.9"}},
		"use_login":     true, "use_alias": false,
		"allow_transfer":      []any{"10.0.0.0/8"},
		"min_notify_interval": 1000, "full_poll_interval": 600000, "reaper_poll_interval": 60000,
		"batch_window_ms": 50, "hysteresis_window_ms": 30000, "hysteresis_last_member_delay_ms": 300000,
		"removal_guard_window_ms": 30000, "removal_guard_min_vms": 50, "removal_guard_percent": 40, "removal_guard_confirm_ms": 60000,
		"vmapi_opts":      map[string]any{"address": "vmapi2.coal.joyent.us"},
		"cnapi_opts":      map[string]any{"address": "cnapi2.coal.joyent.us"},
		"napi_opts":       map[string]any{"address": "napi2.coal.joyent.us"},
		"ufds_opts":       map[string]any{"address": "ufds2.coal.joyent.us"},
		"changefeed_opts": map[string]any{"instance": "another-instance"},
		"db_path":         "/var/db/cns.db", "dns_listen": []any{"127.0.0.1:5353"},
		"inventory_file": "inventory.json",
		"api_server":     map[string]any{"listen": "127.0.0.1:8080"},
		"log_level":      "debug", "hide_version": true, "hide_identity": true,
		"also_notify": []any{"10.0.0.7"}, "signers": []any{"10.0.0.8"},
		"tsig_keys": map[string]any{"k": map[string]any{"secret": "c2VjcmV0"}},
		"peer_keys": map[string]any{},
		"aggregate": map[string]any{"region.example.org": map[string]any{"sources": []any{
			map[string]any{"zone": "dc1.example.org", "primaries": []any{"10.1.0.10"}}}}},
		"journal_max_entries": 100, "journal_max_bytes": 1 << 20, "journal_max_age_s": 3600, "max_rrset": 50,
		"reverse_v4_prefix": 16, "reverse_v6_prefix": 48,
		"rrl":            map[string]any{"responses_per_second": 10},
		"forwarding":     map[string]any{"clients": []any{"10.0.0.0/8"}, "upstreams": []any{"10.0.0.2"}},
		"client_answers": map[string]any{"networks": []any{"3b5913ec-42e6-4803-9c0b-c9b1c5603520"}},
		"propagation":    map[string]any{"threshold_percent": 50},
		"catalog_zone":   "catalog.example.org",
	}
	var base map[string]any
	json.Unmarshal([]byte(referenceConfig), &base)
	base["peer_keys"] = map[string]any{"ns1.example.org": "k"}
	base["tsig_keys"] = map[string]any{"k": map[string]any{"secret": "b2xk"}}
	data, _ := json.Marshal(base)
	old, err := Parse(data, "cfg.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys {
		if k.Section == SectionIgnored {
			continue
		}
		v, ok := another[k.Name]
		if !ok {
			t.Errorf("%s: no other value to compare with", k.Name)
			continue
		}
		var m map[string]any
		json.Unmarshal(data, &m)
		m[k.Name] = v
		b, _ := json.Marshal(m)
		next, err := Parse(b, "cfg.json")
		if err != nil {
			t.Errorf("%s: %v", k.Name, err)
			continue
		}
		changed, restart := Diff(old, next)
		if !slices.Contains(changed, k.Name) {
			t.Errorf("%s changed, but Diff names %q", k.Name, changed)
		}
		if slices.Contains(restart, k.Name) != k.Restart {
			t.Errorf("%s: restart %q, want the key in it: %v", k.Name, restart, k.Restart)
		}
	}
}
