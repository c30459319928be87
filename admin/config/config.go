// Package config is cns's configuration: the reference implementation's
// config.json plus cns's own keys, its parser, and cnsadm's editing of it.
package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/db"
)

// DefaultAPIPort is the REST API's port when api_server.listen is absent,
// as the reference: CloudAPI and cnsadm expect it there.
const DefaultAPIPort = 80

// Config is cns's configuration: the reference implementation's
// config.json (rendered by config-agent from SAPI), accepted unchanged,
// plus cns's own optional keys.
type Config struct {
	Path string // the file it came from

	MyName        string
	Hostmaster    string
	Forward       []ForwardZone // in file order
	Reverse       ReverseZones
	AllowTransfer []netip.Prefix
	UseLogin      bool
	UseAlias      bool
	// MinNotifyInterval spaces NOTIFYs to one peer (reference default 5 s).
	MinNotifyInterval time.Duration

	// FullPollInterval and ReaperPollInterval are the reference's keys
	// (milliseconds in the file; zero when absent). BatchWindow is how long
	// changes gather into one commit (batch_window_ms, default 25 ms).
	FullPollInterval   time.Duration
	ReaperPollInterval time.Duration
	BatchWindow        time.Duration

	// HysteresisWindow and HysteresisLastMemberDelay are RFD 1's
	// self-removal numbers (hysteresis_window_ms, default 60 s;
	// hysteresis_last_member_delay_ms, default 600 s); zero: the default.
	HysteresisWindow          time.Duration
	HysteresisLastMemberDelay time.Duration

	// SDC API options, kept as given for the SDC feeds.
	VMAPI      json.RawMessage
	CNAPI      json.RawMessage
	NAPI       json.RawMessage
	UFDS       json.RawMessage
	Changefeed json.RawMessage

	// cns's own keys.
	DBPath        string
	DNSListen     []string
	InventoryFile string
	// APIListen is api_server.listen: nil when absent (the reference's
	// listeners: port DefaultAPIPort on loopback and the zone's admin
	// addresses), empty for no API.
	APIListen    []string
	APIToken     string // api_server.token: remote callers of mutating endpoints
	APIReadToken string // api_server.read_token: required for reads when set
	LogLevel     string // log_level: trace, debug, info, warn, error
	HideVersion  bool   // hide_version: version.bind/version.server answer REFUSED
	HideIdentity bool   // hide_identity: id.server/hostname.bind answer REFUSED

	// Replication.
	AlsoNotify []netip.AddrPort  // also_notify, every zone
	Signers    []netip.Addr      // signers: DNSSEC-signing secondaries
	TSIGKeys   []TSIGKey         // tsig_keys
	PeerKeys   map[string]string // peer_keys: peer name or address → key name
	Journal    db.JournalLimits  // journal_max_entries, journal_max_bytes, journal_max_age_s
	MaxRRset   int               // max_rrset (default 90)
	Catalog    string            // catalog_zone: RFC 9432 catalog of every zone
	RRL        RRL               // rrl: response rate limiting, off by default
	Forwarding Forwarding        // forwarding: resolve other names for chosen clients
	// ClientAnswers is client_answers: owner-less names answered in the
	// asking instance's own scope (off when Networks is empty).
	ClientAnswers ClientAnswers
	Propagation   Propagation // propagation: how serials are followed to the secondaries
	Aggregate     []Region    // aggregate: region zones made of other cns zones (RFD 172)

	// ReverseV4Prefix and ReverseV6Prefix size the reverse zones
	// (reverse_v4_prefix 8, 16 or 24, default 24; reverse_v6_prefix 32, 48
	// or 64, default 64).
	ReverseV4Prefix int
	ReverseV6Prefix int

	// Warnings name keys that were ignored.
	Warnings []string
}

// RRL is rrl: response rate limiting, off by default. The fields are
// serve.RRL's; main converts it.
type RRL struct {
	ResponsesPerSecond     int
	Slip                   int
	IPv4Prefix, IPv6Prefix int
	Exempt                 []netip.Prefix
}

// Forwarding is forwarding: which clients may have other names resolved,
// and by whom (zero CacheEntries and Timeout: serve's defaults).
type Forwarding struct {
	Clients      []netip.Prefix
	Upstreams    []netip.AddrPort
	CacheEntries int
	Timeout      time.Duration
}

// ClientAnswers is client_answers: the networks (or pools) whose
// addresses identify the instance a query comes from, and the extra
// addresses on which only client-scoped service is offered.
type ClientAnswers struct {
	Networks []string // network or pool UUIDs, lower case
	Listen   []netip.AddrPort
}

// Propagation is propagation: how serials are followed to the
// secondaries (zero values: serve's defaults).
type Propagation struct {
	ThresholdPercent int
	PollDelay        time.Duration
	PollInterval     time.Duration
	PollTimeout      time.Duration
	PollMaxRetries   int
	PeriodicSync     time.Duration
}

// ForwardZone is one entry of forward_zones.
type ForwardZone struct {
	Name          string
	Networks      []string
	Peers         []string
	HiddenPrimary bool
	AlsoNotify    []netip.AddrPort
}

// TSIGKey is one entry of tsig_keys.
type TSIGKey struct {
	Name, Algorithm, Secret string
}

// ReverseZones is reverse_zones: settings shared by every reverse zone.
type ReverseZones struct {
	Peers         []string
	HiddenPrimary bool
	AlsoNotify    []netip.AddrPort
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
