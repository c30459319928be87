package config

import (
	"errors"
	"testing"
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
		c.RecordsConfig()
		c.ZoneConfig()
		c.DBOptions()
	})
}
