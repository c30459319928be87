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
// Each key is set to its Example on the reference's config.
func TestEveryKeyIsCompared(t *testing.T) {
	var base map[string]any
	json.Unmarshal([]byte(referenceConfig), &base)
	// A key the examples name (peer_keys, aggregate), defined with
	// another secret.
	base["peer_keys"] = map[string]any{"ns1.example.org": "xfr-key"}
	base["tsig_keys"] = map[string]any{"xfr-key": map[string]any{"secret": "b2xk"}}
	data, _ := json.Marshal(base)
	old, err := Parse(data, "cfg.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys {
		if k.Section == SectionIgnored {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(k.Example), &v); err != nil {
			t.Errorf("%s: its Example %q: %v", k.Name, k.Example, err)
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
