package secondarytest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// zoneFile turns a zone name into a file name inside the working dir.
func zoneFile(zone string) string {
	if zone == "" {
		return "root.zone"
	}
	r := strings.NewReplacer("/", "_", "\\", "_", " ", "_")
	return r.Replace(zone) + ".zone"
}

// bindConf writes named.conf. named runs with -g (foreground, log to
// stderr), -4 and one worker; controls {} disables rndc.
func bindConf(cfg *Config, port int, identity string) (string, error) {
	host, pport := hostPort(cfg.Primary)
	var b strings.Builder
	primaries := fmt.Sprintf("%s port %s", host, pport)
	notify := "127.0.0.1;"
	if cfg.Key != nil {
		fmt.Fprintf(&b, "key %s {\n\talgorithm %s;\n\tsecret %s;\n};\n", quote(cfg.Key.Name), cfg.Key.algorithm(), quote(cfg.Key.Secret))
		primaries += " key " + quote(cfg.Key.Name)
		// A NOTIFY from a primary's address must carry the primary's key;
		// others are checked against allow-notify: the key only.
		notify = "key " + quote(cfg.Key.Name) + ";"
	}
	d := cfg.Dir
	fmt.Fprintf(&b, `options {
	directory %s;
	pid-file %s;
	session-keyfile %s;
	managed-keys-directory %s;
	bindkeys-file %s;
	dump-file %s;
	statistics-file %s;
	memstatistics-file %s;
	listen-on port %d { %s; };
	listen-on-v6 { none; };
	server-id %s;
	recursion no;
	dnssec-validation no;
	notify no;
	allow-query { any; };
	allow-transfer { 127.0.0.1; };
	allow-notify { %s };
	request-ixfr yes;
	min-refresh-time 1;
	min-retry-time 1;
	max-retry-time 2;
	masterfile-format text;
%s%s`, quote(d), quote(filepath.Join(d, "named.pid")), quote(filepath.Join(d, "session.key")), quote(d),
		quote(filepath.Join(d, "bind.keys")), quote(filepath.Join(d, "named_dump.db")),
		quote(filepath.Join(d, "named.stats")), quote(filepath.Join(d, "named.memstats")),
		port, cfg.Address, quote(identity), notify, bindRates(cfg), bindSources(cfg))
	if cfg.Catalog != "" {
		if err := os.MkdirAll(filepath.Join(d, "catz"), 0o755); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\tcatalog-zones {\n\t\tzone %s default-primaries { %s; } zone-directory %s in-memory no min-update-interval 1;\n\t};\n",
			quote(cfg.Catalog+"."), primaries, quote(filepath.Join(d, "catz")))
	}
	b.WriteString("};\ncontrols { };\n")
	b.WriteString(bindPolicy(cfg))
	// named runs with -f -d 3: xfer-in logs at debug 3 whether a transfer
	// was incremental; everything else at info, all on stderr.
	b.WriteString(`logging {
	channel main { stderr; severity info; print-time yes; print-category yes; };
	channel xfer { stderr; severity debug 3; print-time yes; print-category yes; };
	category default { main; };
	category xfer-in { xfer; };
};
`)
	zones := cfg.Zones
	if cfg.Catalog != "" {
		zones = append([]string{cfg.Catalog}, zones...)
	}
	for _, z := range zones {
		fmt.Fprintf(&b, "zone %s {\n\ttype secondary;\n\tprimaries { %s; };\n\tfile %s;\n%s};\n",
			quote(z+"."), primaries, quote(zoneFile(z)), bindZoneSigning(cfg))
	}
	return b.String(), nil
}

// bindRates raises serial-query-rate: BIND's SOA-query rate limiter
// releases queries on a tick of 10/rate seconds (500 ms at the default
// 20/s), so the refresh a NOTIFY asks for waits up to a tick.
func bindRates(cfg *Config) string {
	if cfg.StockRates {
		return ""
	}
	return "\tserial-query-rate 1000;\n"
}

// knotConf writes knot.conf. knotd logs to stderr; the control socket,
// timer, journal and catalog databases live in the working dir. Zones are
// never written to a zone file (zonefile-sync -1), so a large transfer
// costs no flush, and the journal keeps changes only (Knot's default):
// with journal-content all the zone itself goes into the journal, and a
// 100k-VM zone (~80 MB) outgrows journal-max-usage (100 MiB), after which
// every IXFR fails to store ("not enough space provided") and Knot falls
// back to AXFR.
func knotConf(cfg *Config, port int, identity string) (string, error) {
	if len(cfg.ZoneFiles) > 0 {
		return knotFilesConf(cfg, port, identity), nil
	}
	if len(cfg.Zones) == 0 && cfg.Catalog == "" {
		return "", fmt.Errorf("knot: no zones and no catalog")
	}
	host, pport := hostPort(cfg.Primary)
	d := cfg.Dir
	var b strings.Builder
	fmt.Fprintf(&b, `server:
    rundir: %s
    listen: %s@%d
    identity: %s
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1

log:
  - target: stderr
    any: info

database:
    storage: %s
    journal-db-mode: asynchronous

control:
    listen: %s
`, quote(d), cfg.Address, port, quote(identity), quote(d), quote(filepath.Join(d, "knot.sock")))
	keyRef := ""
	if cfg.Key != nil {
		fmt.Fprintf(&b, "\nkey:\n  - id: %s\n    algorithm: %s\n    secret: %s\n", quote(cfg.Key.Name), cfg.Key.algorithm(), quote(cfg.Key.Secret))
		keyRef = "    key: " + quote(cfg.Key.Name) + "\n"
	}
	fmt.Fprintf(&b, "\nremote:\n  - id: primary\n    address: %s@%s\n%s%s", host, pport, knotVia(cfg), keyRef)
	b.WriteString(knotPolicy(cfg))
	fmt.Fprintf(&b, "\nacl:\n  - id: notify_from_primary\n    address: 127.0.0.1\n    action: notify\n%s  - id: transfer_to_local\n    address: 127.0.0.1\n    action: transfer\n", keyRef)
	fmt.Fprintf(&b, `
template:
  - id: default
    storage: %s
    file: "%%s.zone"
    master: primary
    acl: [notify_from_primary, transfer_to_local]
    zonefile-sync: -1
    zonefile-load: none
    journal-content: changes
    refresh-min-interval: 2
    retry-min-interval: 1
    retry-max-interval: 2
    semantic-checks: off
`, quote(filepath.Join(d, "zones")))
	if cfg.Catalog != "" {
		fmt.Fprintf(&b, `  - id: member
    storage: %s
    file: "%%s.zone"
    master: primary
    acl: [notify_from_primary, transfer_to_local]
    zonefile-sync: -1
    zonefile-load: none
    journal-content: changes
    refresh-min-interval: 2
    retry-min-interval: 1
    retry-max-interval: 2
    semantic-checks: off
`, quote(filepath.Join(d, "zones")))
	}
	b.WriteString("\nzone:\n")
	if cfg.Catalog != "" {
		fmt.Fprintf(&b, "  - domain: %s\n    catalog-role: interpret\n    catalog-template: member\n", quote(cfg.Catalog+"."))
	}
	for _, z := range cfg.Zones {
		fmt.Fprintf(&b, "  - domain: %s\n%s", quote(z+"."), knotZoneSigning(cfg))
	}
	return b.String(), nil
}

// nsdConf writes nsd.conf. nsd runs with -d (foreground) as the current
// user (username ""), with no database, its xfrd state and temporary
// transfer files in the working dir, and no remote control.
func nsdConf(cfg *Config, port int, identity string) (string, error) {
	if len(cfg.ZoneFiles) > 0 {
		return nsdFilesConf(cfg, port, identity), nil
	}
	host, pport := hostPort(cfg.Primary)
	d := cfg.Dir
	var b strings.Builder
	fmt.Fprintf(&b, `server:
    ip-address: %s@%d
    do-ip4: yes
    do-ip6: no
    server-count: 1
    username: ""
    chroot: ""
    database: ""
    zonesdir: %s
    zonelistfile: %s
    xfrdfile: %s
    xfrdir: %s
    pidfile: %s
    logfile: %s
    verbosity: 2
    identity: %s
    hide-identity: no
    hide-version: no
    refuse-any: no
    # Debian's NSD enables RRL (200 qps per /24); tests poll from one address.
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
    # Reload as soon as a transfer is in (default: at most once a second).
    xfrd-reload-timeout: 0
    zonefiles-write: 0

remote-control:
    control-enable: no
`, cfg.Address, port, quote(d), quote(filepath.Join(d, "zone.list")), quote(filepath.Join(d, "xfrd.state")),
		quote(d), quote(filepath.Join(d, "nsd.pid")), quote(filepath.Join(d, "nsd.log")), quote(identity))
	keyName := "NOKEY"
	if cfg.Key != nil {
		fmt.Fprintf(&b, "\nkey:\n    name: %s\n    algorithm: %s\n    secret: %s\n", quote(cfg.Key.Name), cfg.Key.algorithm(), quote(cfg.Key.Secret))
		keyName = quote(cfg.Key.Name)
	}
	// What every slaved zone is told, catalog members included.
	secondary := fmt.Sprintf(`    request-xfr: %s@%s %s
    outgoing-interface: %s
    allow-notify: 127.0.0.1 %s
    allow-axfr-fallback: yes
    provide-xfr: 127.0.0.1 NOKEY
    min-refresh-time: 1
    min-retry-time: 1
    max-retry-time: 2
`, host, pport, keyName, cfg.Address, keyName)
	for _, z := range cfg.Zones {
		fmt.Fprintf(&b, "\nzone:\n    name: %s\n    zonefile: %s\n%s", quote(z+"."), quote(zoneFile(z)), secondary)
	}
	if cfg.Catalog != "" {
		// NSD 4.9's catalog consumer (nsd.conf(5): catalog,
		// catalog-member-pattern): the member zones it lists are added
		// with the pattern, and kept in the zonelistfile. CatalogSupported
		// keeps older versions from getting here.
		fmt.Fprintf(&b, "\npattern:\n    name: \"catalog-member\"\n    zonefile: \"%%s.zone\"\n%s", secondary)
		fmt.Fprintf(&b, "\nzone:\n    name: %s\n    zonefile: %s\n    catalog: consumer\n    catalog-member-pattern: \"catalog-member\"\n%s",
			quote(cfg.Catalog+"."), quote(zoneFile(cfg.Catalog)), secondary)
	}
	return b.String(), nil
}

// knotFilesConf makes Knot a primary loading cfg.ZoneFiles (read once,
// never written back, no journal), with its defaults for answers.
func knotFilesConf(cfg *Config, port int, identity string) string {
	d := cfg.Dir
	var b strings.Builder
	fmt.Fprintf(&b, `server:
    rundir: %s
    listen: %s@%d
    identity: %s
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1

log:
  - target: stderr
    any: info

database:
    storage: %s

control:
    listen: %s

template:
  - id: default
    storage: %s
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
    semantic-checks: off

zone:
`, quote(d), cfg.Address, port, quote(identity), quote(d), quote(filepath.Join(d, "knot.sock")), quote(d))
	for _, z := range sortedKeys(cfg.ZoneFiles) {
		fmt.Fprintf(&b, "  - domain: %s\n    file: %s\n", quote(z+"."), quote(cfg.ZoneFiles[z]))
	}
	return b.String()
}

// nsdFilesConf makes NSD a primary loading cfg.ZoneFiles, with its
// defaults for answers (RRL off: tests ask from one address).
func nsdFilesConf(cfg *Config, port int, identity string) string {
	d := cfg.Dir
	var b strings.Builder
	fmt.Fprintf(&b, `server:
    ip-address: %s@%d
    do-ip4: yes
    do-ip6: no
    server-count: 1
    username: ""
    chroot: ""
    database: ""
    zonesdir: %s
    zonelistfile: %s
    xfrdfile: %s
    xfrdir: %s
    pidfile: %s
    logfile: %s
    verbosity: 1
    identity: %s
    hide-identity: no
    hide-version: no
    refuse-any: no
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
    zonefiles-write: 0

remote-control:
    control-enable: no
`, cfg.Address, port, quote(d), quote(filepath.Join(d, "zone.list")), quote(filepath.Join(d, "xfrd.state")),
		quote(d), quote(filepath.Join(d, "nsd.pid")), quote(filepath.Join(d, "nsd.log")), quote(identity))
	for _, z := range sortedKeys(cfg.ZoneFiles) {
		fmt.Fprintf(&b, "\nzone:\n    name: %s\n    zonefile: %s\n", quote(z+"."), quote(cfg.ZoneFiles[z]))
	}
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
