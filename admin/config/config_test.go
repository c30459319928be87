package config

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/feeds/sdc"
)

// The reference's own rendered config (sdc-apis.md §6) is accepted as is.
const referenceConfig = `{
	"my_name": "cns.coal.joyent.us",
	"hostmaster": "hostmaster@joyent.us",
	"forward_zones": {"Coal.CNS.joyent.us":{"networks":["*"]},"example.org":{"networks":["3b5913ec-42e6-4803-9c0b-c9b1c5603520"],"peers":["ns1.example.org"],"hidden_primary":true}},
	"reverse_zones": {},
	"allow_transfer": ["10.99.99.0/24", "127.0.0.1"],
	"use_alias": true,
	"full_poll_interval": 10000,
	"reaper_poll_interval": 300000,
	"redis_opts": { "dropBufferSupport": true },
	"binder_domain": "binder.coal.joyent.us",
	"ufds_opts": {"address": "ufds.coal.joyent.us", "bindDN": "cn=root", "bindPassword": "secret"},
	"cnapi_opts": { "address": "cnapi.coal.joyent.us" },
	"napi_opts": { "address": "napi.coal.joyent.us" },
	"vmapi_opts": { "address": "vmapi.coal.joyent.us", "limit": 500 },
	"changefeed_opts": {"resource": "vm", "subResources": ["alias","customer_metadata","destroyed","internal_metadata","nics","owner_uuid","server_uuid","state","tags"], "instance": "a1b2c3d4-e5f6-4a1b-8c2d-3e4f5a6b7c8d"}
}`

func TestParseReferenceConfig(t *testing.T) {
	c, err := Parse([]byte(referenceConfig), "config.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings for the reference's own keys: %q", c.Warnings)
	}
	if names := []string{c.Forward[0].Name, c.Forward[1].Name}; !slices.Equal(names, []string{"coal.cns.joyent.us", "example.org"}) {
		t.Errorf("zones %q: want file order, lower case", names)
	}
	if c.DBPath != defaultDBPath || !slices.Equal(c.DNSListen, []string{"0.0.0.0:53", "[::]:53"}) || c.MinNotifyInterval != 500*time.Millisecond {
		t.Errorf("defaults: db %s listen %v notify %v", c.DBPath, c.DNSListen, c.MinNotifyInterval)
	}
	if c.SDC.FullPollInterval != sdc.MinFullPollInterval || c.SDC.ReaperInterval != 300*time.Second || c.SDC.VMAPI.Limit != 500 || !c.UseAlias || c.UseLogin {
		t.Errorf("fields: %+v", c)
	}
	if len(c.AllowTransfer) != 2 || c.AllowTransfer[1].String() != "127.0.0.1/32" {
		t.Errorf("allow_transfer %v", c.AllowTransfer)
	}
	if rc := c.RecordsConfig(); rc.ReverseV4Prefix != 24 || rc.ReverseV6Prefix != 64 {
		t.Errorf("reverse zone sizes /%d /%d, want the reference's /24 and /64", rc.ReverseV4Prefix, rc.ReverseV6Prefix)
	}

	zc := c.ZoneConfig()
	open := zc.Forward["coal.cns.joyent.us"]
	if open.MName != "cns.coal.joyent.us." || open.RName != "hostmaster.joyent.us." || !slices.Equal(open.NS, []string{"cns.coal.joyent.us."}) {
		t.Errorf("visible zone apex: %+v", open)
	}
	if open.Refresh != 30 || open.Retry != 60 || open.Expire != 2592000 || open.Minimum != 30 || open.SOATTL != 30 || open.NSTTL != 3600 {
		t.Errorf("SOA timers: %+v", open)
	}
	hidden := zc.Forward["example.org"]
	if hidden.MName != "ns1.example.org." || !slices.Equal(hidden.NS, []string{"ns1.example.org."}) {
		t.Errorf("hidden primary: SOA %s NS %v, want the first peer and cns left out", hidden.MName, hidden.NS)
	}
}

func TestParseConfigErrorsAndWarnings(t *testing.T) {
	base := func() map[string]any {
		var m map[string]any
		json.Unmarshal([]byte(referenceConfig), &m)
		return m
	}
	cases := []struct {
		name string
		edit func(map[string]any)
		err  string // "" means valid
		warn string
	}{
		{"unknown key warns", func(m map[string]any) { m["colour"] = "blue" }, "", `unknown key "colour"`},
		{"use_alias as string", func(m map[string]any) { m["use_alias"] = "false" }, "", ""},
		{"old slaves key", func(m map[string]any) {
			m["forward_zones"] = map[string]any{"a.example": map[string]any{"networks": []string{"*"}, "slaves": []string{"ns2.example"}}}
		}, "", ""},
		{"missing my_name", func(m map[string]any) { delete(m, "my_name") }, "my_name: required", ""},
		{"my_name not a host", func(m map[string]any) { m["my_name"] = "not a host" }, "my_name", ""},
		{"empty forward_zones", func(m map[string]any) { m["forward_zones"] = map[string]any{} }, "at least one zone", ""},
		{"duplicate zone by case", func(m map[string]any) {
			m["forward_zones"] = map[string]any{"a.example": map[string]any{"networks": []string{"*"}}, "A.example": map[string]any{"networks": []string{"*"}}}
		}, "listed twice", ""},
		{"no networks", func(m map[string]any) {
			m["forward_zones"] = map[string]any{"a.example": map[string]any{"peers": []string{"ns"}}}
		}, "networks: required", ""},
		{"hidden without peers", func(m map[string]any) {
			m["forward_zones"] = map[string]any{"a.example": map[string]any{"networks": []string{"*"}, "hidden_primary": true}}
		}, "needs at least one peer", ""},
		{"bad peer", func(m map[string]any) { m["reverse_zones"] = map[string]any{"peers": []string{"not valid!"}} }, "reverse_zones.peers[0]", ""},
		{"negative interval", func(m map[string]any) { m["min_notify_interval"] = -1 }, "must not be negative", ""},
		{"api listen", func(m map[string]any) { m["api_server"] = map[string]any{"listen": "everywhere"} }, "api_server.listen", ""},
		{"api listen list", func(m map[string]any) {
			m["api_server"] = map[string]any{"listen": []string{"127.0.0.1:80", "everywhere"}}
		}, "api_server.listen[1]", ""},
		{"api listen number", func(m map[string]any) { m["api_server"] = map[string]any{"listen": 80} }, "api_server.listen: want", ""},
		{"opts not an object", func(m map[string]any) { m["vmapi_opts"] = "vmapi" }, "vmapi_opts", ""},
		{"reverse_v4_prefix 8", func(m map[string]any) { m["reverse_v4_prefix"] = 8 }, "", ""},
		{"reverse_v4_prefix 16", func(m map[string]any) { m["reverse_v4_prefix"] = 16 }, "", ""},
		{"reverse_v4_prefix 20", func(m map[string]any) { m["reverse_v4_prefix"] = 20 }, "reverse_v4_prefix: must be 8, 16 or 24", ""},
		{"reverse_v4_prefix 32", func(m map[string]any) { m["reverse_v4_prefix"] = 32 }, "reverse_v4_prefix", ""},
		{"reverse_v4_prefix string", func(m map[string]any) { m["reverse_v4_prefix"] = "8" }, "reverse_v4_prefix", ""},
		{"reverse_v6_prefix 48", func(m map[string]any) { m["reverse_v6_prefix"] = 48 }, "", ""},
		{"reverse_v6_prefix 56", func(m map[string]any) { m["reverse_v6_prefix"] = 56 }, "reverse_v6_prefix: must be 32, 48 or 64", ""},
		{"signers", func(m map[string]any) { m["signers"] = []string{"192.0.2.53", "2001:db8::53"} }, "", ""},
		{"signer by name", func(m map[string]any) { m["signers"] = []string{"ns2.example"} }, "signers[0]", ""},
		{"reverse_v6_prefix 0", func(m map[string]any) { m["reverse_v6_prefix"] = 0 }, "reverse_v6_prefix", ""},
	}
	for _, tc := range cases {
		m := base()
		tc.edit(m)
		data, _ := json.Marshal(m)
		c, err := Parse(data, "cfg.json")
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "config cfg.json: ")):
			t.Errorf("%s: error %v, want one naming the file and %q", tc.name, err, tc.err)
		case tc.warn != "" && (c == nil || !strings.Contains(strings.Join(c.Warnings, "\n"), tc.warn)):
			t.Errorf("%s: warnings %v, want %q", tc.name, c.Warnings, tc.warn)
		}
	}
}

// Relative paths in a config file are relative to the file.
func TestLoadConfigRelativePaths(t *testing.T) {
	c, err := Load("../../testdata/cns.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.DBPath != "../../testdata/var/cns.db" || c.InventoryFile != "../../testdata/inventory.json" {
		t.Errorf("paths: db %s inventory %s", c.DBPath, c.InventoryFile)
	}
	if _, err := os.Stat(c.InventoryFile); err != nil {
		t.Error(err)
	}
}

// reverse_v4_prefix and reverse_v6_prefix reach record generation.
func TestReversePrefixConfig(t *testing.T) {
	var m map[string]any
	json.Unmarshal([]byte(referenceConfig), &m)
	m["reverse_v4_prefix"], m["reverse_v6_prefix"] = 8, 48
	data, _ := json.Marshal(m)
	c, err := Parse(data, "cfg.json")
	if err != nil {
		t.Fatal(err)
	}
	if rc := c.RecordsConfig(); rc.ReverseV4Prefix != 8 || rc.ReverseV6Prefix != 48 {
		t.Errorf("records config /%d /%d, want /8 /48", rc.ReverseV4Prefix, rc.ReverseV6Prefix)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %q", c.Warnings)
	}
}

// hysteresis_window_ms and hysteresis_last_member_delay_ms: RFD 1's
// self-removal numbers.
func TestHysteresisConfig(t *testing.T) {
	base := func() map[string]any {
		var m map[string]any
		json.Unmarshal([]byte(referenceConfig), &m)
		return m
	}
	for _, tc := range []struct {
		name       string
		edit       func(map[string]any)
		err        string
		window     time.Duration
		lastMember time.Duration
	}{
		{"absent: the defaults", func(map[string]any) {}, "", 0, 0},
		{"both", func(m map[string]any) {
			m["hysteresis_window_ms"], m["hysteresis_last_member_delay_ms"] = 30000, 120000
		}, "", 30 * time.Second, 2 * time.Minute},
		{"zero", func(m map[string]any) { m["hysteresis_window_ms"] = 0 }, "hysteresis_window_ms: must be at least 1", 0, 0},
		{"negative", func(m map[string]any) { m["hysteresis_last_member_delay_ms"] = -5 }, "hysteresis_last_member_delay_ms", 0, 0},
		{"string", func(m map[string]any) { m["hysteresis_window_ms"] = "60s" }, "hysteresis_window_ms", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			tc.edit(m)
			data, _ := json.Marshal(m)
			c, err := Parse(data, "cfg.json")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "config cfg.json: ") {
					t.Errorf("error %v, want one naming the file and %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Hysteresis.Window != tc.window || c.Hysteresis.LastMemberDelay != tc.lastMember || len(c.Warnings) != 0 {
				t.Errorf("window %v, last member %v, warnings %q; want %v, %v, none",
					c.Hysteresis.Window, c.Hysteresis.LastMemberDelay, c.Warnings, tc.window, tc.lastMember)
			}
		})
	}
}

// The removal guard's keys: defaults when absent, each value checked.
func TestRemovalGuardConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys map[string]any
		err  string
		want [4]any // window, min VMs, percent, confirm
	}{
		{"absent: the defaults", nil, "", [4]any{time.Duration(0), 20, 25, time.Duration(0)}},
		{"all", map[string]any{"removal_guard_window_ms": 30000, "removal_guard_min_vms": 100, "removal_guard_percent": 100, "removal_guard_confirm_ms": 60000},
			"", [4]any{30 * time.Second, 100, 100, time.Minute}},
		{"no VMs", map[string]any{"removal_guard_min_vms": 0}, "removal_guard_min_vms: must be at least 1", [4]any{}},
		{"percent 0", map[string]any{"removal_guard_percent": 0}, "removal_guard_percent: must be between 1 and 100", [4]any{}},
		{"percent 101", map[string]any{"removal_guard_percent": 101}, "removal_guard_percent: must be between 1 and 100", [4]any{}},
		{"a fraction", map[string]any{"removal_guard_percent": 0.25}, "removal_guard_percent", [4]any{}},
		{"no period", map[string]any{"removal_guard_confirm_ms": 0}, "removal_guard_confirm_ms: must be at least 1", [4]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			json.Unmarshal([]byte(referenceConfig), &m)
			maps.Copy(m, tc.keys)
			data, _ := json.Marshal(m)
			c, err := Parse(data, "cfg.json")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "config cfg.json: ") {
					t.Errorf("error %v, want one naming the file and %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := [4]any{c.Guard.Window, c.Guard.MinVMs, c.Guard.Percent, c.Guard.Confirm}; got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// api_server.listen: absent means the reference's listeners (nil), a
// string one address, a list several, [] none.
func TestAPIListenForms(t *testing.T) {
	for _, tc := range []struct {
		listen any
		want   []string
	}{
		{nil, nil},
		{"127.0.0.1:8080", []string{"127.0.0.1:8080"}},
		{[]string{"127.0.0.1:80", "[::1]:80"}, []string{"127.0.0.1:80", "[::1]:80"}},
		{[]string{}, []string{}},
	} {
		api := map[string]any{"token": "t"}
		if tc.listen != nil {
			api["listen"] = tc.listen
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(referenceConfig), &m)
		m["api_server"] = api
		data, _ := json.Marshal(m)
		c, err := Parse(data, "config.json")
		if err != nil {
			t.Fatalf("%v: %v", tc.listen, err)
		}
		if !slices.Equal(c.APIListen, tc.want) || (c.APIListen == nil) != (tc.want == nil) || c.APIToken != "t" {
			t.Errorf("listen %v: got %q (nil %v), token %q; want %q", tc.listen, c.APIListen, c.APIListen == nil, c.APIToken, tc.want)
		}
	}
}

// client_answers: off when absent; networks required and UUIDs; listen
// entries are IP:port.
func TestClientAnswersConfig(t *testing.T) {
	const net1 = "0E16A7E3-1111-4F3C-9A57-0D6C3E1C5A01"
	for _, tc := range []struct {
		name     string
		value    any
		err      string
		networks []string
		listen   []string
	}{
		{"absent: off", nil, "", nil, nil},
		{"networks", map[string]any{"networks": []string{net1}}, "", []string{strings.ToLower(net1)}, nil},
		{"listen", map[string]any{"networks": []string{net1}, "listen": []string{"192.168.128.2:53"}}, "", []string{strings.ToLower(net1)}, []string{"192.168.128.2:53"}},
		{"no networks", map[string]any{"listen": []string{"192.168.128.2:53"}}, "client_answers.networks: required", nil, nil},
		{"not a uuid", map[string]any{"networks": []string{"admin"}}, "client_answers.networks[0]", nil, nil},
		{"bad listen", map[string]any{"networks": []string{net1}, "listen": []string{"192.168.128.2"}}, "client_answers.listen[0]", nil, nil},
		{"not an object", []string{net1}, "client_answers", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			json.Unmarshal([]byte(referenceConfig), &m)
			if tc.value != nil {
				m["client_answers"] = tc.value
			}
			data, _ := json.Marshal(m)
			c, err := Parse(data, "cfg.json")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var listen []string
			for _, a := range c.ClientAnswers.Listen {
				listen = append(listen, a.String())
			}
			if !slices.Equal(c.ClientAnswers.Networks, tc.networks) || !slices.Equal(listen, tc.listen) {
				t.Errorf("got networks %v listen %v, want %v %v", c.ClientAnswers.Networks, listen, tc.networks, tc.listen)
			}
		})
	}
}
