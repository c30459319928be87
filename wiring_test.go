package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/serve"
)

// FuzzWiring: every config that validates (admin/config's FuzzParse
// corpus, then fuzzed) gives a transfer policy and a rate limit the DNS
// server accepts.
func FuzzWiring(f *testing.F) {
	files, err := filepath.Glob("admin/config/testdata/fuzz/FuzzParse/*")
	if err != nil || len(files) == 0 {
		f.Fatalf("no FuzzParse corpus: %v", err)
	}
	for _, path := range files {
		f.Add(readCorpusBytes(f, path))
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
		c, err := config.Parse(data, "fuzz.json")
		if err != nil {
			return // FuzzParse checks the errors
		}
		if err := srv.SetAccess(serve.ResolveTransfers(context.Background(), c.Transfers(), log, false)); err != nil {
			t.Fatalf("a config that validates gives a transfer policy the server refuses: %v", err)
		}
		srv.SetRRL(c.RRL)
	})
}

// readCorpusBytes decodes a one-value corpus file ("go test fuzz v1",
// then []byte("...")).
func readCorpusBytes(f *testing.F, path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	lines := bytes.SplitN(bytes.TrimSpace(data), []byte("\n"), 2)
	if len(lines) != 2 || string(lines[0]) != "go test fuzz v1" {
		f.Fatalf("%s: not a fuzz corpus file", path)
	}
	lit := bytes.TrimSuffix(bytes.TrimPrefix(lines[1], []byte("[]byte(")), []byte(")"))
	s, err := strconv.Unquote(string(lit))
	if err != nil {
		f.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}
