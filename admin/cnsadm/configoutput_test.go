package cnsadm

import (
	"strings"
	"testing"

	"github.com/tritondatacenter/cns/admin/config"
)

// jsonObject decodes a JSON object, keeping its order.
func jsonObject(t *testing.T, s string) *config.JSONObject {
	t.Helper()
	o := config.NewJSONObject()
	if err := o.UnmarshalJSON([]byte(s)); err != nil {
		t.Fatal(err)
	}
	return o
}

// cnsadm config: the reference's five keys, label column 15 wide; the help
// column only when $COLUMNS > 15 + (31 + 4) + 40, the value column then
// COLUMNS - 56 wide; an absent boolean shows its meaning.
func TestWriteConfigLayout(t *testing.T) {
	cfg := jsonObject(t, `{"my_name": "ns.example.com", "hostmaster": "h@example.com", "use_alias": true,
		"allow_transfer": ["10.0.0.1", "10.1.0.0/16"]}`)
	for _, tc := range []struct {
		name    string
		cfg     *config.JSONObject
		columns int
		waiting map[string]bool
		want    string
	}{
		{"unset COLUMNS", cfg, 0, nil, layout(
			"my_name:         ns.example.com|",
			"hostmaster:      h@example.com|",
			"use_login:       false|",
			"use_alias:       true|",
			"allow_transfer:  10.0.0.1|",
			"                 10.1.0.0/16|",
		)},
		{"90 columns: still no help", cfg, 90, nil, layout(
			"my_name:         ns.example.com|",
			"hostmaster:      h@example.com|",
			"use_login:       false|",
			"use_alias:       true|",
			"allow_transfer:  10.0.0.1|",
			"                 10.1.0.0/16|",
		)},
		{"100 columns: help", cfg, 100, nil, layout(
			"my_name:         ns.example.com                                (zone master hostname, SOA mname)|",
			"hostmaster:      h@example.com                                 (email contact)|",
			"use_login:       false                                         (use user login in DNS names)|",
			"use_alias:       true                                          (use VM aliases in DNS names)|",
			"allow_transfer:  10.0.0.1                                      (IPs allowed to use AXFR/IXFR)|",
			"                 10.1.0.0/16                                   |",
		)},
		{"empty list, absent use_alias, waiting", jsonObject(t, `{"my_name": "ns.example.com", "hostmaster": "h@example.com",
			"use_login": true, "allow_transfer": []}`), 0, map[string]bool{"use_login": true, "allow_transfer": true}, layout(
			"my_name:         ns.example.com|",
			"hostmaster:      h@example.com|",
			"use_login:       true*|",
			"use_alias:       true|",
			"allow_transfer:  []*|",
			"* - changes waiting on config-agent to apply|",
		)},
	} {
		var b strings.Builder
		WriteConfig(&b, tc.cfg, tc.columns, tc.waiting)
		if b.String() != tc.want {
			t.Errorf("%s: got\n%q\nwant\n%q", tc.name, b.String(), tc.want)
		}
	}
}

// zonesConfig's forward zones are not in name order: cnsadm lists them
// in the configuration's.
const zonesConfig = `{
	"forward_zones": {
		"us-west-1.int.example.com": {
			"networks": ["c66bd90b-6e21-4a55-a4b5-18f6010c6b14", "5983940e-58a5-4543-b732-c689b1fe4c08"],
			"peers": ["ns1.example.com", "ns2.example.com"],
			"hidden_primary": true
		},
		"empty.example.com": {"networks": []},
		"us-west-1.cns.example.com": {"networks": ["*"]}
	},
	"reverse_zones": {"peers": ["ns1.example.com"]}
}`

// cnsadm zones: the forward zones in the configuration's order, then
// the reverse settings; columns as wide as their widest cell (the last one
// padded too), the reverse settings as (ip-reverse-lookup); past the
// terminal's width (80 when unset; COLUMNS-2 above 80; at most 120) the
// widest column shrinks and its long cells end in "...".
func TestWriteZonesLayout(t *testing.T) {
	for _, tc := range []struct {
		columns int
		want    string
	}{
		// 25+9+31+14 and 3 gaps of 2 = 85 > 80: PEERS loses 5.
		{0, layout(
			"ZONE                       NETWORKS   PEERS                       HIDDEN PRIMARY|",
			"us-west-1.int.example.com  (2 UUIDs)  ns1.example.com,ns2.exa...  true          |",
			"empty.example.com                                                 false         |",
			"us-west-1.cns.example.com  *                                      false         |",
			"(ip-reverse-lookup)                   ns1.example.com             false         |",
		)},
		// 87 - 2 = 85: it fits.
		{87, layout(
			"ZONE                       NETWORKS   PEERS                            HIDDEN PRIMARY|",
			"us-west-1.int.example.com  (2 UUIDs)  ns1.example.com,ns2.example.com  true          |",
			"empty.example.com                                                      false         |",
			"us-west-1.cns.example.com  *                                           false         |",
			"(ip-reverse-lookup)                   ns1.example.com                  false         |",
		)},
		// Very narrow: PEERS no narrower than its title and 3.
		{40, layout(
			"ZONE                       NETWORKS   PEERS     HIDDEN PRIMARY|",
			"us-west-1.int.example.com  (2 UUIDs)  ns1.e...  true          |",
			"empty.example.com                               false         |",
			"us-west-1.cns.example.com  *                    false         |",
			"(ip-reverse-lookup)                   ns1.e...  false         |",
		)},
	} {
		var b strings.Builder
		WriteZones(&b, jsonObject(t, zonesConfig), tc.columns)
		if b.String() != tc.want {
			t.Errorf("COLUMNS=%d: got\n%s\nwant\n%s", tc.columns, b.String(), tc.want)
		}
	}
}

// cnsadm zones ZONE: zone, networks, peers, hidden_primary (label column
// 15), lists one item per line, then cns's also_notify when set.
func TestWriteZoneLayout(t *testing.T) {
	fz := jsonObject(t, zonesConfig).Object("forward_zones")
	for _, tc := range []struct {
		name string
		z    *config.JSONObject
		want string
	}{
		{"us-west-1.int.example.com", fz.Object("us-west-1.int.example.com"), layout(
			"zone:            us-west-1.int.example.com|",
			"networks:        c66bd90b-6e21-4a55-a4b5-18f6010c6b14|",
			"                 5983940e-58a5-4543-b732-c689b1fe4c08|",
			"peers:           ns1.example.com|",
			"                 ns2.example.com|",
			"hidden_primary:  true|",
		)},
		{"reverse", jsonObject(t, `{"peers": ["ns1.example.com"], "also_notify": ["192.0.2.1:5300"]}`), layout(
			"zone:            (ip-reverse-lookup)|",
			"networks:        []|",
			"peers:           ns1.example.com|",
			"hidden_primary:  false|",
			"also_notify:     192.0.2.1:5300|",
		)},
	} {
		var b strings.Builder
		WriteZone(&b, tc.name, tc.z)
		if b.String() != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, b.String(), tc.want)
		}
	}
}
