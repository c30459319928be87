package config

import (
	"strings"
	"testing"
)

// An aggregator without a feed needs no forward_zones; a feed without
// forward_zones is still an error, and the aggregate key is checked.
func TestAggregateKey(t *testing.T) {
	const head = `{"my_name": "agg.example.com", "hostmaster": "hostmaster@example.com",
		"tsig_keys": {"xfr-key": {"algorithm": "hmac-sha256", "secret": "c2VjcmV0"}}, `
	const region = `"aggregate": {"US-West.cns.example.com.": {"sources": [
		{"zone": "us-west-1.cns.example.com", "primaries": ["10.1.0.10", "10.1.0.11:5353"], "key": "xfr-key"},
		{"zone": "us-west-2.cns.example.com", "primaries": ["10.2.0.10"]}]}}`
	for _, tc := range []struct {
		name, body, err string
		standalone      bool
	}{
		{"standalone", region, "", true},
		{"standalone, empty forward_zones", `"forward_zones": {}, ` + region, "", true},
		{"with a DC's zones", `"forward_zones": {"us-west-1.cns.example.com": {"networks": ["*"]}}, "inventory_file": "inv.json", ` + region, "", false},
		{"feed without forward_zones", `"inventory_file": "inv.json", ` + region, "forward_zones: required: the config has a feed", false},
		{"no aggregate, no forward_zones", `"inventory_file": "inv.json"`, "forward_zones: required", false},
		{"unknown key", strings.Replace(region, `"xfr-key"}`, `"nope"}`, 1), `key "nope" is not in tsig_keys`, false},
		{"no primaries", `"aggregate": {"r.example.com": {"sources": [{"zone": "a.example.com", "primaries": []}]}}`, "at least one primary", false},
		{"bad primary", `"aggregate": {"r.example.com": {"sources": [{"zone": "a.example.com", "primaries": ["ns1"]}]}}`, "neither an IP address nor ip:port", false},
		{"no sources", `"aggregate": {"r.example.com": {"sources": []}}`, "at least one source zone", false},
		{"region is a DC zone", `"forward_zones": {"r.example.com": {"networks": ["*"]}}, "inventory_file": "i.json", "aggregate": {"r.example.com": {"sources": [{"zone": "a.example.com", "primaries": ["10.0.0.1"]}]}}`, "zone is also forward_zones", false},
		{"unknown field", `"aggregate": {"r.example.com": {"sources": [{"zone": "a.example.com", "primaries": ["10.0.0.1"], "master": 1}]}}`, "unknown field", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(head+tc.body+"}"), "cns.json")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Standalone() != tc.standalone {
				t.Errorf("Standalone() = %v", c.Standalone())
			}
			r := c.Aggregate[0]
			if r.Zone != "us-west.cns.example.com" || len(r.Sources) != 2 || r.Sources[0].Key == nil || r.Sources[0].Key.Name != "xfr-key." ||
				r.Sources[0].Key.Algorithm != "hmac-sha256." || r.Sources[0].Primaries[0] != "10.1.0.10:53" || r.Sources[0].Primaries[1] != "10.1.0.11:5353" {
				t.Errorf("aggregate = %+v", c.Aggregate)
			}
			if _, ok := c.ZoneConfig().Forward["us-west.cns.example.com"]; !ok {
				t.Errorf("region zone not in the zone config: %+v", c.ZoneConfig())
			}
			if rc := c.RecordsConfig(); len(rc.Zones) != len(c.Forward) {
				t.Errorf("region zone in the records config: %+v", rc.Zones)
			}
		})
	}
}
