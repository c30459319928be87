package secondarytest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Validator is Unbound as a validating resolver for a few signed zones:
// each zone is a stub pointing at one server, anchored by that server's
// DNSKEYs. It never leaves loopback: it listens on 127.0.0.1 only, its
// root hints name a single root server at 127.0.0.254 (nothing listens
// there), nothing but the stub zones is anchored, and outgoing queries
// leave from 127.0.0.1.
type Validator struct {
	addr string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// ValidatorZone is one zone a Validator resolves: where (ADDRESS:PORT),
// and the DNSKEYs to trust for it.
type ValidatorZone struct {
	Server  string
	Anchors []*dns.DNSKEY
}

// StartValidator runs Unbound (Debian package unbound) for zones; it
// skips the test when Unbound is missing.
func StartValidator(t testing.TB, dir string, zones map[string]ValidatorZone) *Validator {
	if testing.Short() {
		t.Skip("-short: starts unbound")
	}
	t.Helper()
	const bin = "/usr/sbin/unbound"
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("unbound not installed (apt-get install unbound): %v", err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	confPath, err := writeUnboundConf(dir, port, zones)
	if err != nil {
		t.Fatal(err)
	}
	v := &Validator{addr: fmt.Sprintf("127.0.0.1:%d", port), log: filepath.Join(dir, "unbound.log"), done: make(chan struct{})}
	lf, err := os.Create(v.log)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	v.cmd = exec.Command(bin, "-d", "-c", confPath)
	v.cmd.Stdout, v.cmd.Stderr, v.cmd.Dir = lf, lf, dir
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := v.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { v.cmd.Wait(); close(v.done) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("unbound log:\n%s", tail(v.Log(), 40))
		}
		v.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-v.done:
		case <-time.After(5 * time.Second):
			v.cmd.Process.Kill()
			<-v.done
		}
	})
	// Up when it answers anything (a refusal of the CHAOS question will do).
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := new(dns.Msg)
		m.SetQuestion("id.server.", dns.TypeTXT)
		m.Question[0].Qclass = dns.ClassCHAOS
		if _, _, err := (&dns.Client{Timeout: 200 * time.Millisecond}).Exchange(m, v.addr); err == nil {
			return v
		}
		select {
		case <-v.done:
			t.Fatalf("unbound exited at start:\n%s", tail(v.Log(), 40))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("unbound did not answer on %s:\n%s", v.addr, tail(v.Log(), 40))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeUnboundConf writes Unbound's configuration into dir: listening on
// 127.0.0.1:port, one stub zone and trust anchor per zone, and a root that
// is not there, so nothing outside the stubs leaves loopback.
func writeUnboundConf(dir string, port int, zones map[string]ValidatorZone) (string, error) {
	hints := filepath.Join(dir, "root.hints")
	// A root that is not there: anything outside the stubs fails on
	// loopback instead of reaching the internet.
	if err := os.WriteFile(hints, []byte(".\t3600000\tNS\tno-root.invalid.\nno-root.invalid.\t3600000\tA\t127.0.0.254\n"), 0o644); err != nil {
		return "", err
	}
	var anchors, stubs, local strings.Builder
	names := make([]string, 0, len(zones))
	for z := range zones {
		names = append(names, z)
	}
	sort.Strings(names)
	for _, z := range names {
		for _, k := range zones[z].Anchors {
			anchors.WriteString(k.String() + "\n")
		}
		// Unbound answers some names itself (test., RFC 1918 reverse
		// zones...): not these.
		labels := dns.SplitDomainName(z)
		for i := range labels {
			fmt.Fprintf(&local, "    local-zone: %s nodefault\n", quote(dns.Fqdn(strings.Join(labels[i:], "."))))
		}
		host, p := hostPort(zones[z].Server)
		fmt.Fprintf(&stubs, "stub-zone:\n    name: %s\n    stub-addr: %s@%s\n    stub-prime: no\n", quote(dns.Fqdn(z)), host, p)
	}
	ta := filepath.Join(dir, "anchors")
	if err := os.WriteFile(ta, []byte(anchors.String()), 0o644); err != nil {
		return "", err
	}
	conf := fmt.Sprintf(`server:
    interface: 127.0.0.1@%d
    port: %d
    do-ip4: yes
    do-ip6: no
    outgoing-interface: 127.0.0.1
    access-control: 127.0.0.0/8 allow
    do-not-query-localhost: no
    username: ""
    chroot: ""
    directory: %s
    pidfile: %s
    use-syslog: no
    logfile: ""
    verbosity: 1
    val-log-level: 2
    module-config: "validator iterator"
    root-hints: %s
    trust-anchor-file: %s
    target-fetch-policy: "0 0 0 0 0"
    qname-minimisation: no
    cache-max-ttl: 0
    cache-max-negative-ttl: 0
%s
remote-control:
    control-enable: no

%s`, port, port, quote(dir), quote(filepath.Join(dir, "unbound.pid")), quote(hints), quote(ta), local.String(), stubs.String())
	confPath := filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return "", err
	}
	return confPath, nil
}

// Addr is the 127.0.0.1:PORT Unbound answers on.
func (v *Validator) Addr() string { return v.addr }

// Log returns what Unbound logged so far.
func (v *Validator) Log() string {
	b, _ := os.ReadFile(v.log)
	return string(b)
}

// Query asks Unbound a recursive question with the DO bit.
func (v *Validator) Query(name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(1232, true)
	r, _, err := (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).Exchange(m, v.addr)
	return r, err
}
