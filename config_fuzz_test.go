package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/serve"
)

// FuzzParseConfig: any file gives a config or a *ConfigError naming the
// file, never a panic; what validates turns into records, zones, a db
// configuration and a transfer policy the DNS server accepts.
func FuzzParseConfig(f *testing.F) {
	for _, path := range []string{"testdata/cns.json"} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		`{}`, `{"my_name": "ns.example.com"}`, `{"my_name": "x",`, `[]`, `null`,
		`{"my_name": "ns.example.com", "hostmaster": "h@example.com", "forward_zones": {"a.example": {"networks": ["*"], "peers": ["p.example"], "hidden_primary": true}}}`,
		`{"my_name": "ns.example.com", "hostmaster": "h@example.com", "forward_zones": {"a.example": {"networks": ["*"]}},
		  "tsig_keys": {"k": {"algorithm": "hmac-sha256", "secret": "c2VjcmV0"}}, "peer_keys": {"10.0.0.1": "k"},
		  "rrl": {"responses_per_second": 20, "slip": 2, "exempt": ["10.0.0.0/8"]}, "allow_transfer": ["127.0.0.1", "10.0.0.0/8"],
		  "forwarding": {"clients": ["10.0.0.0/8"], "upstreams": ["10.0.0.2:53"]}, "dns_listen": ["127.0.0.1:53"],
		  "api_server": {"listen": "127.0.0.1:80", "token": "t"}, "also_notify": ["127.0.0.1:5300"], "catalog_zone": "cat.example",
		  "reverse_v4_prefix": 16, "journal_max_entries": 10}`,
	} {
		f.Add([]byte(s))
	}
	log := slog.New(slog.DiscardHandler)
	store, err := db.Open(filepath.Join(f.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	srv, err := serve.New(serve.Config{Logger: log}, store)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data, "fuzz.json")
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.File != "fuzz.json" {
				t.Fatalf("error %v (%T) is not a ConfigError naming the file", err, err)
			}
			return
		}
		c.RecordsConfig()
		c.ZoneConfig()
		c.DBOptions()
		if err := srv.SetAccess(transferAccess(context.Background(), c, log, false)); err != nil {
			t.Fatalf("a config that validates gives a transfer policy the server refuses: %v", err)
		}
		srv.SetRRL(c.RRL)
	})
}
