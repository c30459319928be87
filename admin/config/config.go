// Package config is cns's configuration schema: the reference
// implementation's config.json plus cns's own keys, the key table, the
// parser and its validation, and the difference between two
// configurations (which a reload applies, which needs a restart). It
// reads the file it is given and nothing else: where the configuration
// lives (a file, SAPI) and how cnsadm edits it are admin/cnsadm's.
package config

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// DefaultAPIPort is the REST API's port when api_server.listen is absent,
// as the reference: CloudAPI and cnsadm expect it there.
const DefaultAPIPort = 80

// Config is cns's configuration: the reference implementation's
// config.json (rendered by config-agent from SAPI), accepted unchanged,
// plus cns's own optional keys. Its sections are the manual's
// (docs/configuration.md); each key is parsed into the type of the part
// of cns that uses it (serve/policy's for the DNS server, records', db's,
// sdc's, hysteresis', aggregate's), so a key's value reaches its consumer
// without a second conversion; the
// methods of sections.go assemble what combines several keys.
type Config struct {
	Path string // the file it came from

	Zones
	Replication
	Feeds
	Server
	Limits

	// Warnings name keys that were ignored.
	Warnings []string
}

// Error is a configuration problem: the file, the key and what is
// wrong with it.
type Error struct {
	File, Key, Problem string
}

func (e *Error) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("config %s: %s", e.File, e.Problem)
	}
	return fmt.Sprintf("config %s: %s: %s", e.File, e.Key, e.Problem)
}

// Load reads and validates a config file. Relative paths inside it
// (db_path, inventory_file) are relative to the file's directory.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Problem: err.Error()}
	}
	c, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	for _, p := range []*string{&c.DBPath, &c.InventoryFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return c, nil
}

// ParseLogLevel accepts bunyan's level names (log_level, cns serve
// --log-level).
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "trace":
		return slog.LevelDebug - 4, nil
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error", "fatal":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q (want trace, debug, info, warn, error or fatal)", s)
}
