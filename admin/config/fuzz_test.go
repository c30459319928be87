package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// FuzzParse: any file gives a config or an *Error naming the file, never
// a panic; what validates turns into records, zones and a db
// configuration. The seeds are testdata/fuzz/FuzzParse/seed-* (the
// reference-shaped testdata/cns.json among them); main's FuzzWiring runs
// the same corpus through the conversion to the DNS server's policy.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.json")
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || ce.File != "fuzz.json" {
				t.Fatalf("error %v (%T) is not an Error naming the file", err, err)
			}
			return
		}
		// What holds for any accepted config: parsing is deterministic,
		// zone names are lower case and unique, every forward zone has its
		// apex, and cns is the SOA primary unless the zone hides it.
		again, err := Parse(data, "fuzz.json")
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("a second parse differs (%v)", err)
		}
		zc := c.ZoneConfig()
		seen := map[string]bool{}
		for _, z := range c.Forward {
			if z.Name != strings.ToLower(z.Name) || seen[z.Name] {
				t.Fatalf("forward zone %q: not lower case, or listed twice", z.Name)
			}
			seen[z.Name] = true
			apex, ok := zc.Forward[z.Name]
			if !ok {
				t.Fatalf("forward zone %q has no apex", z.Name)
			}
			if !z.HiddenPrimary && apex.MName != dns.Fqdn(c.MyName) {
				t.Fatalf("zone %q: SOA primary %q, want my_name %q", z.Name, apex.MName, c.MyName)
			}
		}
		c.RecordsConfig()
		c.DBOptions()
	})
}
