// Package secondarytest runs a real secondary DNS server (BIND, Knot DNS or
// NSD, from their Debian packages) on 127.0.0.1 for tests: it slaves zones
// from a primary under test, so a test can send NOTIFY to it, wait for a
// serial, read the zone back by AXFR and compare it with what the primary
// serves.
//
// Each server runs in the foreground as the current user on a free
// 127.0.0.1 high port, with every file it writes (configuration, pid file,
// control socket, zone files, journals, keys, log) inside Config.Dir. It
// never touches system configuration or port 53.
//
// What each secondary is told:
//
//   - primary: Config.Primary, with Config.Key on every request when set;
//   - NOTIFY accepted from 127.0.0.1 (signed with Config.Key when set,
//     unsigned otherwise);
//   - AXFR allowed to 127.0.0.1 without a key (so Transfer can read the
//     zone back);
//   - IXFR requested from the primary, AXFR fallback allowed;
//   - the shortest refresh/retry floors the server accepts (BIND 1 s,
//     Knot 2 s, NSD 1 s), so a missed NOTIFY costs seconds, not minutes;
//   - BIND's serial-query-rate raised to 1000/s, so a NOTIFY is acted on
//     within 10 ms rather than up to 500 ms (Config.StockRates keeps 20/s);
//   - BIND keeps its default max-records-per-type (100 since 9.18.28).
//
// A catalog zone (RFC 9432, Config.Catalog) is consumed by BIND, Knot and
// NSD 4.9 or later; with an older NSD (Debian 12 ships 4.6) Start skips
// the test, saying so.
package secondarytest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Kind names a secondary implementation.
type Kind string

// The secondaries this package runs.
const (
	BIND Kind = "bind"
	Knot Kind = "knot"
	NSD  Kind = "nsd"
)

// Kinds lists every Kind, for table tests.
var Kinds = []Kind{BIND, Knot, NSD}

// Key is a TSIG key. Algorithm is a name as the servers spell it
// ("hmac-sha256"; empty means hmac-sha256); Secret is base64.
type Key struct{ Name, Algorithm, Secret string }

func (k *Key) algorithm() string {
	if k.Algorithm == "" {
		return "hmac-sha256"
	}
	return strings.TrimSuffix(strings.ToLower(k.Algorithm), ".")
}

// Config says what a secondary slaves and where.
type Config struct {
	Kind Kind
	// Primary is the "127.0.0.1:PORT" the secondary transfers from.
	Primary string
	// Zones are zone names (no trailing dot) slaved statically.
	Zones []string
	// Catalog is an optional RFC 9432 catalog zone the secondary
	// transfers from Primary and whose member zones it slaves from
	// Primary (BIND and Knot; NSD before 4.9 skips).
	Catalog string
	// Key, when set, signs every request to the primary (SOA, IXFR, AXFR)
	// and is required on NOTIFY.
	Key *Key
	// Dir is the working directory (t.TempDir()); everything the server
	// writes lives under it.
	Dir string
	// Port, when non-zero, is the 127.0.0.1 port to listen on (see
	// FreePort), for a primary that must be configured with its
	// secondaries' addresses before they start. Start fails the test if
	// it is taken. Zero picks a free port, and another if that one is
	// lost to a race.
	Port int
	// StartTimeout bounds how long Start waits for the server to answer
	// (default 20 s).
	StartTimeout time.Duration
	// ZoneFiles, when set, makes the server a primary for these zones
	// (name without trailing dot → zone file path) instead of a
	// secondary: Primary, Zones, Catalog and Key are then ignored. Knot
	// and NSD only. Differential tests load what cns exports this way.
	ZoneFiles map[string]string
	// Address is the loopback IPv4 address the server listens on and
	// sends from (default 127.0.0.1): cns tells peers apart by address.
	// BIND listens only on addresses an interface has (127.0.0.1 on a
	// stock lo); Knot and NSD bind any 127/8 address.
	Address string
	// Signing, when set, makes a BIND or Knot secondary sign the zones it
	// transfers with DNSSEC (see signing.go).
	Signing *Signing
	// StockRates keeps the server's own rate limits instead of the fast
	// ones this package sets. For BIND that is serial-query-rate 20/s,
	// whose rate limiter ticks every 500 ms: the SOA query a NOTIFY
	// triggers waits up to half a second (this package sets 1000/s: a
	// 10 ms tick).
	StockRates bool
}

type kindInfo struct {
	binary  string
	pkg     string
	args    func(conf string) []string
	conf    func(cfg *Config, port int, identity string) (string, error)
	confExt string
	// catalog reports whether the installed server consumes catalog
	// zones, from its version line.
	catalog func(version string) bool
	// bindFailed reports a log line that means the listening port was
	// taken, so Start retries on another port.
	bindFailed []string
}

var kinds = map[Kind]kindInfo{
	BIND: {
		binary:     "/usr/sbin/named",
		pkg:        "bind9",
		args:       func(conf string) []string { return []string{"-f", "-d", "3", "-4", "-n", "1", "-c", conf} },
		conf:       bindConf,
		confExt:    "named.conf",
		catalog:    func(string) bool { return true },
		bindFailed: []string{"address in use", "unable to listen on any configured interfaces", "interface ignored"},
	},
	Knot: {
		binary:     "/usr/sbin/knotd",
		pkg:        "knot",
		args:       func(conf string) []string { return []string{"-c", conf} },
		conf:       knotConf,
		confExt:    "knot.conf",
		catalog:    func(string) bool { return true },
		bindFailed: []string{"cannot bind address", "failed to bind", "address already in use"},
	},
	NSD: {
		binary:     "/usr/sbin/nsd",
		pkg:        "nsd",
		args:       func(conf string) []string { return []string{"-d", "-c", conf} },
		conf:       nsdConf,
		confExt:    "nsd.conf",
		catalog:    nsdConsumesCatalogs,
		bindFailed: []string{"address already in use", "can't bind"},
	},
}

// binaryPath lets tests of this package pretend a binary is missing.
var binaryPath = func(k Kind) string { return kinds[k].binary }

// Available returns nil when the server of kind k is installed, or an
// error naming the Debian package that provides it.
func Available(k Kind) error {
	info, ok := kinds[k]
	if !ok {
		return fmt.Errorf("secondarytest: unknown kind %q", k)
	}
	p := binaryPath(k)
	if _, err := exec.LookPath(p); err != nil {
		return fmt.Errorf("secondarytest: %s not installed: %s missing (apt-get install %s)", k, p, info.pkg)
	}
	return nil
}

// CatalogSupported returns nil when the server of kind k can consume an
// RFC 9432 catalog zone through this package.
func CatalogSupported(k Kind) error {
	if err := Available(k); err != nil {
		return err
	}
	if v := version(k); !kinds[k].catalog(v) {
		return fmt.Errorf("secondarytest: %s (%s) does not consume catalog zones (NSD needs 4.9 or later)", k, v)
	}
	return nil
}

// nsdConsumesCatalogs reports whether NSD's version line ("NSD version
// 4.6.1") is 4.9 or later, the first with catalog zones.
func nsdConsumesCatalogs(version string) bool {
	var major, minor int
	if _, err := fmt.Sscanf(version, "NSD version %d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 4 || (major == 4 && minor >= 9)
}

// Installed returns those of kinds (every kind when none is given) that
// are installed here. Each missing one shows as a skipped subtest of t
// named for it, whose message names the Debian package to install: the
// run says what it did not test, and CI, which installs them all, fails
// on such a skip.
func Installed(t *testing.T, kinds ...Kind) []Kind {
	t.Helper()
	return usable(t, Available, kinds)
}

// CatalogConsumers is Installed for the kinds that consume catalog zones
// here.
func CatalogConsumers(t *testing.T, kinds ...Kind) []Kind {
	t.Helper()
	return usable(t, CatalogSupported, kinds)
}

func usable(t *testing.T, check func(Kind) error, kinds []Kind) []Kind {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts real secondaries")
	}
	if len(kinds) == 0 {
		kinds = Kinds
	}
	var out []Kind
	for _, k := range kinds {
		if err := check(k); err != nil {
			t.Run(string(k), func(t *testing.T) { t.Skip(err) })
			continue
		}
		out = append(out, k)
	}
	return out
}

func version(k Kind) string {
	var out []byte
	switch k {
	case BIND:
		out, _ = exec.Command(binaryPath(k), "-v").CombinedOutput()
	case Knot:
		out, _ = exec.Command(binaryPath(k), "-V").CombinedOutput()
	case NSD:
		out, _ = exec.Command(binaryPath(k), "-v").CombinedOutput()
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// Secondary is a running secondary server.
type Secondary struct {
	t    testing.TB
	cfg  Config
	kind kindInfo
	addr string
	log  string // log file path

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process exits
	waitErr error
	stopped bool
}

// Start runs a secondary as cfg says and returns once it answers queries.
// It skips the test when the server is not installed (or, for a catalog,
// cannot consume one) and fails it when the server does not come up. The
// server is stopped when the test ends.
func Start(t testing.TB, cfg Config) *Secondary {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a real secondary")
	}
	if err := Available(cfg.Kind); err != nil {
		t.Skip(err)
	}
	if cfg.Catalog != "" {
		if err := CatalogSupported(cfg.Kind); err != nil {
			t.Skip(err)
		}
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 20 * time.Second
	}
	if cfg.Address == "" {
		cfg.Address = "127.0.0.1"
	}
	if cfg.Signing != nil && cfg.Kind == NSD {
		t.Fatalf("secondarytest: NSD does not sign zones")
	}
	if len(cfg.ZoneFiles) > 0 {
		if cfg.Kind == BIND {
			t.Fatalf("secondarytest: ZoneFiles is for Knot and NSD")
		}
	} else if _, _, err := net.SplitHostPort(cfg.Primary); err != nil {
		t.Fatalf("secondarytest: primary %q: %v", cfg.Primary, err)
	}
	for i, z := range cfg.Zones {
		cfg.Zones[i] = strings.TrimSuffix(z, ".")
	}
	cfg.Catalog = strings.TrimSuffix(cfg.Catalog, ".")
	s := &Secondary{t: t, cfg: cfg, kind: kinds[cfg.Kind]}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		dir := filepath.Join(cfg.Dir, fmt.Sprintf("%s-%d", cfg.Kind, attempt))
		err := s.start(dir)
		if err == nil {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("secondarytest: %s log (%s):\n%s", cfg.Kind, s.log, tail(s.Log(), 60))
				}
				s.Stop()
			})
			return s
		}
		lastErr = err
		if !errors.Is(err, errPortTaken) || cfg.Port != 0 {
			break
		}
	}
	t.Fatalf("secondarytest: start %s: %v", cfg.Kind, lastErr)
	return nil
}

var errPortTaken = errors.New("port taken")

func (s *Secondary) start(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	port := s.cfg.Port
	if port == 0 {
		var err error
		if port, err = pickPort(s.cfg.Address); err != nil {
			return err
		}
	}
	identity := fmt.Sprintf("secondarytest-%s-%d-%d", s.cfg.Kind, os.Getpid(), port)
	cfg := s.cfg
	cfg.Dir = dir
	text, err := s.kind.conf(&cfg, port, identity)
	if err != nil {
		return err
	}
	conf := filepath.Join(dir, s.kind.confExt)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return err
	}
	logPath := filepath.Join(dir, string(s.cfg.Kind)+".log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(binaryPath(s.cfg.Kind), s.kind.args(conf)...)
	cmd.Dir = dir
	cmd.Stdout = lf
	cmd.Stderr = lf
	cmd.Env = append(os.Environ(), "TZ=UTC")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Pause/Resume signal the group
	if err := cmd.Start(); err != nil {
		lf.Close()
		return err
	}
	lf.Close() // the child holds its own descriptor
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done, s.addr, s.log, s.stopped, s.waitErr = cmd, done, net.JoinHostPort(s.cfg.Address, strconv.Itoa(port)), logPath, false, nil
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.waitErr = err
		s.mu.Unlock()
		close(done)
	}()
	if err := s.waitUp(identity); err != nil {
		taken := s.logMentions(s.kind.bindFailed)
		s.Stop()
		// BIND logs to syslog until its logging config is read, so its
		// complaint about the port may not be in the log: the port being
		// held by someone else once the server is gone says it too.
		taken = taken || !portFree(s.cfg.Address, port)
		if taken {
			return fmt.Errorf("%w: %v\n%s log:\n%s", errPortTaken, err, s.cfg.Kind, tail(s.Log(), 20))
		}
		return fmt.Errorf("%v\n%s log:\n%s", err, s.cfg.Kind, tail(s.Log(), 40))
	}
	return nil
}

// waitUp polls the server with CHAOS TXT id.server until it answers with
// identity (the unique string it was configured with: an answer from
// anything else on the port does not count).
func (s *Secondary) waitUp(identity string) error {
	deadline := time.Now().Add(s.cfg.StartTimeout)
	c := &dns.Client{Net: "udp", Timeout: 200 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion("id.server.", dns.TypeTXT)
	m.Question[0].Qclass = dns.ClassCHAOS
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("%s exited during start: %v", s.cfg.Kind, s.exitErr())
		default:
		}
		if s.logMentions(s.kind.bindFailed) {
			return fmt.Errorf("%s could not listen on %s", s.cfg.Kind, s.addr)
		}
		r, _, err := c.Exchange(m, s.addr)
		if err == nil && len(r.Answer) > 0 {
			if txt, ok := r.Answer[0].(*dns.TXT); ok && strings.Join(txt.Txt, "") == identity {
				return nil
			}
			last = fmt.Errorf("someone else answers on %s: %v", s.addr, r.Answer[0])
		} else if err != nil {
			last = err
			if !isTimeout(err) {
				// Connection refused: not listening yet; do not spin.
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	return fmt.Errorf("%s did not answer on %s within %v: %v", s.cfg.Kind, s.addr, s.cfg.StartTimeout, last)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (s *Secondary) logMentions(needles []string) bool {
	l := strings.ToLower(s.Log())
	for _, n := range needles {
		if strings.Contains(l, n) {
			return true
		}
	}
	return false
}

// pickPort is freePortOn (the server's own address), but tests of this
// package hand out a taken port.
var pickPort = freePortOn

// Kind returns the kind of server.
func (s *Secondary) Kind() Kind { return s.cfg.Kind }

// Addr returns the ADDRESS:PORT the secondary answers on (UDP and TCP)
// and listens for NOTIFY on.
func (s *Secondary) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Log returns what the server has logged so far.
func (s *Secondary) Log() string {
	s.mu.Lock()
	p := s.log
	s.mu.Unlock()
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}

// Running reports whether the server process is still alive.
func (s *Secondary) Running() bool {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// PID returns the server's process id (for strace, perf and the like).
func (s *Secondary) PID() int { return s.pid() }

// Pause stops the server process (SIGSTOP) without ending it: it answers
// nothing, NOTIFYs and queries queue in its sockets, and its timers do not
// run, as a secondary cut off from its primary. Resume continues it.
func (s *Secondary) Pause() error {
	if err := s.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	// SIGSTOP takes effect asynchronously: wait until every thread of
	// every process in the group is stopped.
	pgid := s.pid()
	deadline := time.Now().Add(5 * time.Second)
	for !groupStopped(pgid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not stop within 5 s", s.cfg.Kind)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// Resume continues a paused server (SIGCONT).
func (s *Secondary) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Secondary) signal(sig syscall.Signal) error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || !s.Running() {
		return fmt.Errorf("%s is not running", s.cfg.Kind)
	}
	// NSD forks (a main process, xfrd and server children), all in the
	// process group of the one started; signal the group.
	return syscall.Kill(-cmd.Process.Pid, sig)
}

func (s *Secondary) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// groupStopped reports whether every thread of every process in process
// group pgid is stopped (state T in /proc). Without /proc it reports true.
func groupStopped(pgid int) bool {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		_, pg, ok := procStat(filepath.Join("/proc", p.Name(), "stat"))
		if !ok || pg != pgid {
			continue
		}
		tasks, err := os.ReadDir(filepath.Join("/proc", p.Name(), "task"))
		if err != nil {
			continue
		}
		for _, task := range tasks {
			st, _, ok := procStat(filepath.Join("/proc", p.Name(), "task", task.Name(), "stat"))
			if ok && st != 'T' && st != 't' && st != 'Z' && st != 'X' {
				return false
			}
		}
	}
	return true
}

// groupSize counts the live processes of process group pgid (zombies
// not), -1 without /proc.
func groupSize(pgid int) int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return -1
	}
	n := 0
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		st, pg, ok := procStat(filepath.Join("/proc", p.Name(), "stat"))
		if ok && pg == pgid && st != 'Z' && st != 'X' {
			n++
		}
	}
	return n
}

// procStat reads the state and process group from a /proc stat file.
func procStat(path string) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) S ppid pgrp ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(f[2])
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pg, true
}

func (s *Secondary) exitErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitErr
}

// Stop ends the server (SIGTERM, then SIGKILL after 10 s) and waits for it;
// whatever is left of its process group is killed.
// It is safe to call more than once; Start registers it with t.Cleanup.
func (s *Secondary) Stop() {
	s.mu.Lock()
	if s.stopped || s.cmd == nil {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	select {
	case <-done:
		return
	default:
	}
	pgid := -cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGCONT) // a paused server cannot act on SIGTERM
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-done
	}
	// Children that outlived their parent (NSD's xfrd and servers).
	_ = syscall.Kill(pgid, syscall.SIGKILL)
}

func tail(s string, lines int) string {
	b := []byte(strings.TrimRight(s, "\n"))
	n := 0
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n++
			if n == lines {
				return "...\n" + string(b[i+1:])
			}
		}
	}
	return string(bytes.TrimSpace(b))
}

// quote makes s a double-quoted configuration string.
func quote(s string) string { return strconv.Quote(s) }

// hostPort splits cfg.Primary.
func hostPort(addr string) (string, string) {
	h, p, _ := net.SplitHostPort(addr)
	return h, p
}
