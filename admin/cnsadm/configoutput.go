package cnsadm

import (
	"fmt"
	"io"
	"strings"

	"github.com/tritondatacenter/cns/admin/config"
)

// What cnsadm config and cnsadm zones print, in the reference's layout.

// configHelp is the reference's help column for the keys it shows; a
// shown key it does not know uses the key table's help.
var configHelp = map[string]string{
	"my_name":        "zone master hostname, SOA mname",
	"hostmaster":     "email contact",
	"use_login":      "use user login in DNS names",
	"use_alias":      "use VM aliases in DNS names",
	"allow_transfer": "IPs allowed to use AXFR/IXFR",
}

// ReverseZoneLabel is how cnsadm shows the reverse zones' settings.
const ReverseZoneLabel = "(ip-reverse-lookup)"

// WriteConfig prints cnsadm config: the keys the key table marks Shown,
// in its order, a list's items one per line, with a help column when
// $COLUMNS (columns; ≤ 0: unset) is wide enough. Keys in waiting (SAPI
// metadata config-agent has not yet rendered into the file) are marked
// "*", with the reference's footer.
func WriteConfig(w io.Writer, cfg *config.JSONObject, columns int, waiting map[string]bool) error {
	var shown []config.Key
	var labels, helps []string
	for _, k := range config.Keys {
		if k.Cnsadm != config.Shown {
			continue
		}
		if h, ok := configHelp[k.Name]; ok {
			k.Help = h
		}
		shown = append(shown, k)
		labels = append(labels, k.Name)
		helps = append(helps, k.Help)
	}
	f := newFields(w, labels...).withHelp(helps, columns)
	star := false
	for _, k := range shown {
		items := configValue(k, cfg.Value(k.Name))
		if waiting[k.Name] {
			if len(items) == 0 {
				items = []string{"[]"}
			}
			items[0] += "*"
			star = true
		}
		if k.Kind == config.List {
			f.list(k.Name, items, k.Help)
		} else {
			f.helped(k.Name, items[0], k.Help)
		}
	}
	if star {
		fmt.Fprintln(w, "* - changes waiting on config-agent to apply")
	}
	return nil
}

// configValue is a key's value as cnsadm shows it: a list's items, or one
// string. An absent boolean shows what it means (its default).
func configValue(k config.Key, v any) []string {
	switch k.Kind {
	case config.List:
		return textList(v)
	case config.Bool:
		if v == nil {
			return []string{fmt.Sprint(k.Default == "true")}
		}
		return []string{fmt.Sprint(v == true)}
	}
	if v == nil {
		return []string{"(unset)"}
	}
	return []string{fmt.Sprint(v)}
}

// WriteZones prints cnsadm zones: ZONE NETWORKS PEERS HIDDEN PRIMARY, the
// forward zones in the configuration's order (the order a NIC's zones are
// tried), then the reverse settings as the row (ip-reverse-lookup), as
// the reference does, fitted to $COLUMNS (columns; ≤ 0: unset).
func WriteZones(w io.Writer, cfg *config.JSONObject, columns int) error {
	var rows [][]string
	row := func(name string, z *config.JSONObject) {
		if z == nil {
			z = config.NewJSONObject()
		}
		rows = append(rows, []string{name, networksCell(z.Value("networks")), joinCell(z.Value("peers")), fmt.Sprint(z.Value("hidden_primary") == true)})
	}
	if zones := cfg.Object("forward_zones"); zones != nil {
		for _, name := range zones.Keys() {
			row(name, zones.Object(name))
		}
	}
	row(ReverseZoneLabel, cfg.Object("reverse_zones"))
	return writeTable(w, []string{"zone", "networks", "peers", "hidden primary"}, rows, columns)
}

// WriteZone prints one zone's settings: the reference's zone, networks,
// peers and hidden_primary, then cns's also_notify when it is set. name
// "reverse" or "ip-reverse-lookup" is the reverse zones' settings.
func WriteZone(w io.Writer, name string, z *config.JSONObject) error {
	if name == "reverse" || name == "ip-reverse-lookup" {
		name = ReverseZoneLabel
	}
	f := newFields(w, "zone", "networks", "peers", "hidden_primary")
	f.text("zone", name)
	f.list("networks", textList(z.Value("networks")), "")
	f.list("peers", textList(z.Value("peers")), "")
	f.text("hidden_primary", fmt.Sprint(z.Value("hidden_primary") == true))
	if an := textList(z.Value("also_notify")); len(an) > 0 {
		f.list("also_notify", an, "")
	}
	return nil
}

// textList is a JSON list's items as text.
func textList(v any) []string {
	list, _ := v.([]any)
	items := make([]string, len(list))
	for i, it := range list {
		items[i] = fmt.Sprint(it)
	}
	return items
}

// joinCell is a list in one table cell: comma-separated, no spaces.
func joinCell(v any) string {
	return strings.Join(textList(v), ",")
}

// networksCell is "*" for exactly ["*"], "(N UUIDs)", or empty.
func networksCell(v any) string {
	items := textList(v)
	switch {
	case len(items) == 1 && items[0] == "*":
		return "*"
	case len(items) == 0:
		return ""
	}
	return fmt.Sprintf("(%d UUIDs)", len(items))
}
