package config

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's config key tables from the key table")

const (
	readmePath  = "../../README.md"
	readmeBegin = "<!-- config-keys:begin: generated from admin/config/keys.go; go test ./admin/config -run TestREADMEConfigKeys -update -->\n"
	readmeEnd   = "<!-- config-keys:end -->\n"
)

// The README's key tables are the key table's: this fails when they
// disagree, and -update rewrites them.
func TestREADMEConfigKeys(t *testing.T) {
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	i, j := strings.Index(readme, readmeBegin), strings.Index(readme, readmeEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q section", readmePath, readmeBegin, readmeEnd)
	}
	want := keysMarkdown()
	got := readme[i+len(readmeBegin) : j]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(readmePath, []byte(readme[:i+len(readmeBegin)]+want+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's config key tables differ from admin/config/keys.go; run go test ./admin/config -run TestREADMEConfigKeys -update\n--- README\n%s\n--- keys.go\n%s", got, want)
}

// keysMarkdown is the README's section: a table per section, then a
// zone's settings and the ignored keys.
func keysMarkdown() string {
	var b strings.Builder
	for s := SectionZones; s < SectionIgnored; s++ {
		fmt.Fprintf(&b, "\n**%s**\n\n| key | type | default | takes effect | meaning |\n|---|---|---|---|---|\n", s)
		for _, k := range Keys {
			if k.Section != s {
				continue
			}
			effect := "at a reload"
			if k.Restart {
				effect = "restarts cns"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", k.Name, k.Kind, cell(defaultText(k.Default)), effect, cell(k.Help))
		}
	}
	b.WriteString("\n**A zone's settings** (each entry of `forward_zones`; `reverse_zones` takes the ones marked)\n\n| key | type | in `reverse_zones` | old name (`cnsadm upgrade` renames it) | meaning |\n|---|---|---|---|---|\n")
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
	fmt.Fprintf(&b, "\n%s (the reference's keys cns does not use): %s. Any other key is logged as a warning and ignored.\n\n", SectionIgnored, strings.Join(ignored, ", "))
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
