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
