package config

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the manual's key tables and cns.json(5) from the key table")

const (
	manualPath  = "../../docs/configuration.md"
	manualBegin = "<!-- config-keys:begin: generated from admin/config/keys.go; go test ./admin/config -run TestDocsConfigKeys -update -->\n"
	manualEnd   = "<!-- config-keys:end -->\n"
)

// The manual's key tables (docs/configuration.md) are the key table's:
// this fails when they disagree, and -update rewrites them.
func TestDocsConfigKeys(t *testing.T) {
	data, err := os.ReadFile(manualPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, manualBegin), strings.Index(doc, manualEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q section", manualPath, manualBegin, manualEnd)
	}
	want := keysMarkdown()
	got := doc[i+len(manualBegin) : j]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(manualPath, []byte(doc[:i+len(manualBegin)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's key tables differ from admin/config/keys.go; run go test ./admin/config -run TestDocsConfigKeys -update\n--- manual\n%s\n--- keys.go\n%s", manualPath, got, want)
}

// keysMarkdown is the manual's section: a table per section, then a
// zone's settings and the ignored keys, each under a heading of its own.
func keysMarkdown() string {
	var b strings.Builder
	for s := SectionZones; s < SectionIgnored; s++ {
		fmt.Fprintf(&b, "\n### %s\n\n| key | type | default | takes effect | meaning |\n|---|---|---|---|---|\n", s)
		for _, k := range Keys {
			if k.Section != s {
				continue
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", k.Name, k.Kind, cell(defaultText(k.Default)), k.takesEffect(), cell(k.Help))
		}
	}
	b.WriteString("\n### A zone's settings\n\nEach entry of `forward_zones`; `reverse_zones` takes the ones marked.\n\n| key | type | in `reverse_zones` | old name (`cnsadm upgrade` renames it) | meaning |\n|---|---|---|---|---|\n")
	for _, k := range ZoneKeys {
		rev, legacy := "", ""
		if k.Reverse {
			rev = "yes"
		}
		if k.Legacy != "" {
			legacy = "`" + k.Legacy + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", k.Name, k.Kind, rev, legacy, cell(k.Help))
	}
	var ignored []string
	for _, k := range Keys {
		if k.Section == SectionIgnored {
			ignored = append(ignored, "`"+k.Name+"`")
		}
	}
	fmt.Fprintf(&b, "\n### %s\n\nThe reference's keys cns does not use: %s. Any other key is logged as a warning and ignored.\n\n", SectionIgnored, strings.Join(ignored, ", "))
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
