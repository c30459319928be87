package smf

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tritondatacenter/cns/admin/config"
)

// The boot scripts, the build scripts and the SMF method are valid
// sh/bash and pass shellcheck (Debian package shellcheck).
func TestBootScriptsCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs shellcheck")
	}
	for _, c := range [][]string{
		{"bash", "-n", "boot/setup.sh"}, {"bash", "-n", "boot/configure.sh"},
		{"bash", "-n", "boot/lib/util.sh"}, {"bash", "-n", "boot/lib/cns.sh"},
		{"bash", "-n", "boot/sbin/postlogrotate.sh"}, {"bash", "-n", "boot/etc/root.bashrc"},
		{"bash", "-n", "build-release.sh"}, {"bash", "-n", "build-image.sh"}, {"sh", "-n", "method/cns"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Skip("shellcheck not installed (Debian package shellcheck); syntax checked only")
	}
	// -x follows the scripts' `. lib/...` (their source= directives).
	cmd := exec.Command("shellcheck", "-x", "setup.sh", "configure.sh", "lib/util.sh", "lib/cns.sh", "sbin/postlogrotate.sh")
	cmd.Dir = "boot"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("shellcheck boot: %v\n%s", err, out)
	}
	for _, c := range [][]string{{"method/cns", "build-release.sh", "build-image.sh"}, {"-s", "bash", "boot/etc/root.bashrc"}} {
		if out, err := exec.Command("shellcheck", c...).CombinedOutput(); err != nil {
			t.Errorf("shellcheck: %v\n%s", err, out)
		}
	}
}

// zone is a scratch copy of the image's root, with stand-ins for the
// illumos commands the boot scripts run, in its usr/sbin and usr/bin
// (setup.sh puts them first in PATH when ZONE_ROOT is set). Every
// stand-in appends "name args" to calls; each refuses what the real one
// refuses where a step's order depends on it:
//   - svccfg import fails for a manifest that does not exist;
//   - svcadm enable and disable fail for a service whose manifest was
//     not imported ("svcadm: Pattern '...' doesn't match any instances"):
//     the brand Triton's core zones use imports neither rbac, pfexecd nor
//     cron;
//   - mdata-get answers the keys SAPI and the platform set for a cns zone,
//     and exits 1 (not found) for any other;
//   - useradd records user cns, which getent then finds.
type zone struct {
	root, calls string
}

func newZone(t *testing.T) *zone {
	if testing.Short() {
		t.Skip("-short: runs the boot scripts")
	}
	t.Helper()
	imageBuild(t)
	z := &zone{root: filepath.Join(t.TempDir(), "zone")}
	z.calls = filepath.Join(filepath.Dir(z.root), "calls")
	if out, err := exec.Command("cp", "-a", image.root, z.root).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	state := filepath.Join(filepath.Dir(z.root), "state")
	os.MkdirAll(state, 0o755)
	stub := func(path, body string) {
		t.Helper()
		path = filepath.Join(z.root, path)
		os.MkdirAll(filepath.Dir(path), 0o755)
		script := "#!/bin/bash\necho \"$(basename \"$0\") $*\" >>\"$CNS_TEST_CALLS\"\nstate=" + state + "\n" + body + "\n"
		if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stub("usr/bin/zonename", "echo 4e0b4d4c-7a8e-4ab4-9d0e-3b1b8e0e2c11")
	stub("usr/sbin/zfs", `case $1 in list) exit 0;; get) echo /zones/4e0b4d4c-7a8e-4ab4-9d0e-3b1b8e0e2c11/data;; esac`)
	stub("usr/sbin/mdata-get", `case $1 in
sdc:tags.smartdc_role) echo cns;;
sdc:datacenter_name) echo us-west-1;;
sapi-url) echo http://10.99.99.25;;
*) exit 1;;
esac`)
	stub("usr/sbin/svccfg", `[ "$1" = import ] && [ -f "$2" ] || { echo "svccfg: cannot import $2" >&2; exit 1; }
sed -n 's/.*<service name="\([^"]*\)".*/svc:\/\1:default/p' "$2" >>$state/imported`)
	stub("usr/sbin/svcadm", `fmri=${!#}
grep -qx "$fmri" $state/imported 2>/dev/null || { echo "svcadm: Pattern '$fmri' doesn't match any instances" >&2; exit 1; }`)
	stub("usr/sbin/logadm", "exit 0")
	stub("usr/sbin/groupadd", "echo $1 >>$state/groups")
	stub("usr/sbin/useradd", "echo ${!#} >>$state/users")
	stub("usr/bin/getent", `case $1 in passwd) db=users;; group) db=groups;; esac
grep -qx "$2" "$state/$db" 2>/dev/null`)
	stub("usr/bin/chown", "exit 0") // the test runs as root, and has no user cns
	// The origin image's root crontab and logadm.conf.
	os.WriteFile(filepath.Join(state, "crontab"), []byte("# Rotate system logs\n10 3 * * * /usr/sbin/logadm\n15 3 * * * /usr/sbin/rtc -c > /dev/null 2>&1\n"), 0o644)
	stub("usr/bin/crontab", `if [ "$1" = -l ]; then cat $state/crontab; else cat >$state/crontab; fi`)
	for _, m := range []string{"pfexecd:system/pfexec", "rbac:system/rbac", "cron:system/cron"} {
		file, svc, _ := strings.Cut(m, ":")
		p := filepath.Join(z.root, "lib/svc/manifest/system", file+".xml")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(`<service name="`+svc+`"><instance name="default"/></service>`+"\n"), 0o644)
	}
	os.MkdirAll(filepath.Join(z.root, "etc"), 0o755)
	os.WriteFile(filepath.Join(z.root, "etc/logadm.conf"), []byte("smf_logs -C 3 -c -s 1m /var/svc/log/*.log\n/var/log/*.log -C 2 -c -s 5m\n/var/log/*.debug -C 2 -c -s 5m\n"), 0o644)
	os.MkdirAll(filepath.Join(z.root, "root"), 0o755)
	os.MkdirAll(filepath.Join(z.root, "var/svc"), 0o755)
	return z
}

// run runs one of the image's boot scripts in the zone, as the
// user-script does, with SAPI's metadata for the instance.
func (z *zone) run(t *testing.T, script string) (string, error) {
	t.Helper()
	hogan := hoganDir(t)
	sapi := filepath.Join(filepath.Dir(z.root), "sapi.json")
	raw, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"datacenter_name": "us-west-1", "dns_domain": "example.com",
			"ufds_ldap_root_dn": "cn=root", "ufds_ldap_root_pw": "s3cr3t",
			"SERVICE_NAME": "cns", "SERVICE_DOMAIN": "cns.us-west-1.example.com",
			"ZK_SERVERS": []any{
				map[string]any{"host": "10.99.99.11", "port": 2181, "num": 1},
				map[string]any{"host": "10.99.99.12", "port": 2181, "num": 2, "last": true},
			},
			"INSTANCE_UUID": "4e0b4d4c-7a8e-4ab4-9d0e-3b1b8e0e2c11",
		},
		"auto": map[string]any{"INSTANCE_UUID": "4e0b4d4c-7a8e-4ab4-9d0e-3b1b8e0e2c11", "ADMIN_IP": "10.99.99.40"},
	})
	os.WriteFile(sapi, raw, 0o644)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	cmd := exec.Command("bash", filepath.Join(z.root, "opt/smartdc/boot", script))
	cmd.Env = append(os.Environ(), "ZONE_ROOT="+z.root, "CNS_TEST_CALLS="+z.calls, "CNS_TEST_SAPI="+sapi,
		"CNS_TEST_NODE="+node, "CNS_TEST_CONFIGAGENT="+filepath.Join(wd, "testdata/hogan/configagent.js"),
		"NODE_PATH="+filepath.Join(hogan, "node_modules"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// callLog is what the stand-ins were asked, in order.
func (z *zone) callLog(t *testing.T) []string {
	raw, _ := os.ReadFile(z.calls)
	return strings.Split(strings.TrimSuffix(strings.ReplaceAll(string(raw), z.root, "Z"), "\n"), "\n")
}

// The first boot of the image's tree (setup.sh) against the stand-ins:
// every step of sdc-scripts' sdc_common_setup in its order, registrar
// set up with its config rendered (by the real hogan.js) naming
// cns.<dc>.<dns_domain>, the logs rotated through postlogrotate.sh, the
// db directory given to cns recursively before the service starts; then
// a later boot (configure.sh).
func TestBootSetup(t *testing.T) {
	z := newZone(t)
	if out, err := z.run(t, "setup.sh"); err != nil {
		t.Fatalf("setup.sh: %v\n%s", err, out)
	}
	calls := z.callLog(t)
	at := func(call string) int {
		i := slices.Index(calls, call)
		if i < 0 {
			t.Errorf("no call %q", call)
		}
		return i
	}
	// Each pair in this order: imported before enabled, the config
	// rendered before what reads it, the db cns's before cns starts.
	for _, c := range [][2]string{
		{"amon-agent postinstall in Z/opt/amon-agent", "svccfg import Z/lib/svc/manifest/system/pfexecd.xml"},
		{"svccfg import Z/lib/svc/manifest/system/pfexecd.xml", "svcadm enable -s svc:/system/pfexec:default"},
		{"svccfg import Z/lib/svc/manifest/system/rbac.xml", "svcadm enable -s svc:/system/rbac:default"},
		{"svcadm enable -s svc:/system/rbac:default", "svcadm disable -s svc:/system/rbac:default"}, // the shards merged
		{"svcadm disable -s svc:/system/rbac:default", "node Z/opt/smartdc/config-agent/agent.js -s"},
		{"node Z/opt/smartdc/config-agent/agent.js -s", "svccfg import Z/opt/smartdc/config-agent/smf/manifests/config-agent.xml"},
		{"svccfg import Z/opt/smartdc/config-agent/smf/manifests/config-agent.xml", "svcadm enable svc:/smartdc/application/config-agent:default"},
		{"node Z/opt/smartdc/config-agent/agent.js -s", "svccfg import Z/opt/smartdc/registrar/smf/manifests/registrar.xml"},
		{"svccfg import Z/opt/smartdc/registrar/smf/manifests/registrar.xml", "svcadm enable svc:/manta/application/registrar:default"},
		{"svcadm enable svc:/manta/application/registrar:default", "svccfg import Z/lib/svc/manifest/system/cron.xml"},
		{"svccfg import Z/lib/svc/manifest/system/cron.xml", "svcadm enable -s svc:/system/cron:default"},
		{"useradd -g cns -d /opt/triton/cns -s /usr/bin/false -P Metadata Reader cns", "chown -R cns:cns Z/data/cns"},
		{"chown -R cns:cns Z/data/cns", "svccfg import Z/opt/triton/cns/smf/manifests/cns.xml"},
		{"svccfg import Z/opt/triton/cns/smf/manifests/cns.xml", "svcadm enable svc:/triton/application/cns:default"},
		{"logadm -w cns -S 1g -C 168 -c -p 1h -t /var/log/sdc/upload/cns_$nodename_%FT%H:%M:%S.log -a /opt/smartdc/boot/sbin/postlogrotate.sh cns /var/svc/log/*triton-application-cns*.log",
			"logadm -r smf_logs"},
		{"logadm -w smf_logs -C 3 -c -s 1m /var/svc/log/*.log", "logadm -w /var/log/*.log -C 2 -c -s 5m"},
	} {
		if a, b := at(c[0]), at(c[1]); a >= 0 && b >= 0 && a > b {
			t.Errorf("%q came after %q", c[0], c[1])
		}
	}
	for _, c := range []string{
		"zfs set mountpoint=/data zones/4e0b4d4c-7a8e-4ab4-9d0e-3b1b8e0e2c11/data",
		"groupadd cns",
		"chown root:sys Z/var/log/sdc/upload",
		"logadm -w /var/adm/messages -C 4 -a kill -HUP `cat /var/run/rsyslogd.pid`",
		"logadm -r /var/log/*.debug",
	} {
		at(c)
	}
	for _, name := range []string{"amon-agent", "config-agent", "registrar"} {
		if !slices.ContainsFunc(calls, func(c string) bool {
			return strings.HasPrefix(c, "logadm -w "+name+" -S 1g -C 168 -c -p 1h ") &&
				strings.Contains(c, " -a /opt/smartdc/boot/sbin/postlogrotate.sh "+name+" ")
		}) {
			t.Errorf("%s's log not rotated through postlogrotate.sh:\n%s", name, strings.Join(calls, "\n"))
		}
	}

	// registrar's config, as config-agent rendered it from the image's
	// manifest: cns.<dc>.<dns_domain> on the admin address, the API's port.
	var reg registrarConfig
	raw, _ := os.ReadFile(filepath.Join(z.root, "opt/smartdc/registrar/etc/config.json"))
	if err := json.Unmarshal(raw, &reg); err != nil {
		t.Fatalf("registrar config: %v\n%s", err, raw)
	}
	if reg.Registration.Domain != "cns.us-west-1.example.com" || reg.AdminIP != "10.99.99.40" ||
		reg.Registration.Service.Service.Srvce != "_http" || reg.Registration.Service.Service.Port != 80 ||
		len(reg.Zookeeper.Servers) != 2 || reg.Zookeeper.Servers[1].Host != "10.99.99.12" {
		t.Errorf("registrar config: %+v", reg)
	}
	// cns's, from the same metadata.
	if cfg, err := config.Load(filepath.Join(z.root, "opt/triton/cns/etc/config.json")); err != nil || cfg.MyName != "cns.us-west-1.example.com" {
		t.Errorf("cns config.json: %v", err)
	}
	var agent struct {
		PollInterval      int
		SAPI              struct{ URL string }
		LocalManifestDirs []string
	}
	raw, _ = os.ReadFile(filepath.Join(z.root, "opt/smartdc/config-agent/etc/config.json"))
	if err := json.Unmarshal(raw, &agent); err != nil || agent.SAPI.URL != "http://10.99.99.25" ||
		!slices.Equal(agent.LocalManifestDirs, []string{"/opt/triton/cns"}) || agent.PollInterval != 120000 {
		t.Errorf("config-agent config: %v %s", err, raw)
	}
	if m, _ := os.ReadFile(filepath.Join(z.root, "opt/smartdc/config-agent/smf/manifests/config-agent.xml")); !strings.Contains(string(m), `exec="/opt/smartdc/config-agent/bin/agent.sh"`) {
		t.Errorf("config-agent manifest's @@PREFIX@@ not replaced: %s", m)
	}
	// The Metadata Reader profile, root's crontab, the marks setup leaves.
	if shard, _ := os.ReadFile(filepath.Join(z.root, "etc/security/exec_attr.d/mdata")); !strings.Contains(string(shard),
		"\nMetadata Reader:solaris:cmd:::/usr/sbin/mdata-get:privs=file_dac_search\n") {
		t.Errorf("exec_attr.d/mdata: %s", shard)
	}
	if shard, _ := os.ReadFile(filepath.Join(z.root, "etc/security/prof_attr.d/mdata")); !strings.Contains(string(shard), "\nMetadata Reader:::") {
		t.Errorf("prof_attr.d/mdata: %s", shard)
	}
	crontab, _ := os.ReadFile(filepath.Join(filepath.Dir(z.root), "state/crontab"))
	if c := string(crontab); strings.Count(c, "/usr/sbin/logadm") != 1 || !strings.Contains(c, "\n0 * * * * /usr/sbin/logadm -v >> /var/log/logadm.log 2>&1\n") ||
		!strings.Contains(c, "/usr/sbin/rtc") {
		t.Errorf("root crontab:\n%s", c)
	}
	for _, f := range []string{"var/svc/setup_complete", "root/.bashrc"} {
		if _, err := os.Stat(filepath.Join(z.root, f)); err != nil {
			t.Errorf("/%s: %v", f, err)
		}
	}
	if dc, _ := os.ReadFile(filepath.Join(z.root, ".dcinfo")); string(dc) != "SDC_DATACENTER_NAME=\"us-west-1\"\n" {
		t.Errorf("/.dcinfo: %q", dc)
	}
	if fi, err := os.Stat(filepath.Join(z.root, "data/cns")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("db directory: %v %v, want mode 0700", fi, err)
	}

	// A later boot: the user-script runs configure.sh. User cns exists;
	// the db directory is given to cns again, recursively (a reprovision
	// may have changed cns's uid).
	os.Remove(z.calls)
	if out, err := z.run(t, "configure.sh"); err != nil {
		t.Fatalf("configure.sh: %v\n%s", err, out)
	}
	calls = z.callLog(t)
	at("chown -R cns:cns Z/data/cns")
	if slices.ContainsFunc(calls, func(c string) bool {
		return strings.HasPrefix(c, "useradd") || strings.HasPrefix(c, "svc") || strings.HasPrefix(c, "node")
	}) {
		t.Errorf("configure.sh does more than re-apply the mount and the db's owner:\n%s", strings.Join(calls, "\n"))
	}
}

// logadm names each rotated copy by the -t template that
// sdc_log_rotation_add gives it, then runs postlogrotate.sh, which folds
// it into the hour's file: the name the data center's log archiver takes
// (hermes: NAME_<zonename>_<date>T<hour>:00:00.log). Two rotations in an
// hour (a restart, a reprovision) land in one file; SDC_LOG_ROLL_FORWARD
// moves it to the next hour, across a day.
func TestPostLogRotate(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs postlogrotate.sh")
	}
	root := t.TempDir()
	upload := filepath.Join(root, "var/log/sdc/upload")
	os.MkdirAll(upload, 0o755)
	gnuDate, err := exec.LookPath("date")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(root, "opt/local/bin"), 0o755)
	os.Symlink(gnuDate, filepath.Join(root, "opt/local/bin/date"))

	// logadm's name for a copy of cns's log: the -t template of
	// sdc_log_rotation_add, $nodename and strftime expanded.
	lib, _ := os.ReadFile("boot/lib/util.sh")
	m := regexp.MustCompile(`-t "/var/log/sdc/upload/\$\{name\}_\\\$nodename_(%FT%H:%M:%S)\.log"`).FindSubmatch(lib)
	if m == nil {
		t.Fatal("no -t template in sdc_log_rotation_add")
	}
	rotate := func(stamp, content string, env ...string) {
		t.Helper()
		f := filepath.Join(upload, "cns_4e0b4d4c_"+stamp+".log")
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "boot/sbin/postlogrotate.sh", "cns")
		cmd.Env = append(os.Environ(), append(env, "ZONE_ROOT="+root)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("postlogrotate.sh: %v\n%s", err, out)
		}
	}
	stamp := func(format string) string {
		out, err := exec.Command("date", "-u", "-d", "2026-03-04 05:12:34", "+"+format).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	os.WriteFile(filepath.Join(upload, "config-agent_4e0b4d4c_2026-03-04T05:59:00.log"), []byte("other\n"), 0o644)
	// Back to back, as no logadm runs them: the hour's file just appended
	// to is as new as the next copy, and must not be taken for it.
	rotate(stamp(string(m[1])), "first\n")
	rotate("2026-03-04T05:40:00", "second\n")
	rotate("2026-03-04T23:50:00", "late\n", "SDC_LOG_ROLL_FORWARD=1")
	rotate("2026-03-04T07:00:00", "on the hour\n") // already its hour's name

	entries, _ := os.ReadDir(upload)
	got := map[string]string{}
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(upload, e.Name()))
		got[e.Name()] = string(b)
	}
	want := map[string]string{
		"cns_4e0b4d4c_2026-03-04T05:00:00.log":          "first\nsecond\n",
		"cns_4e0b4d4c_2026-03-05T00:00:00.log":          "late\n",
		"cns_4e0b4d4c_2026-03-04T07:00:00.log":          "on the hour\n",
		"config-agent_4e0b4d4c_2026-03-04T05:59:00.log": "other\n", // another log's: untouched
	}
	if len(got) != len(want) {
		t.Errorf("upload directory %q, want %q", got, want)
	}
	hermes := regexp.MustCompile(`^[a-z-]+_[0-9a-f]+_\d{4}-\d\d-\d\dT\d\d:00:00\.log$`)
	for name, content := range want {
		if got[name] != content {
			t.Errorf("%s: %q, want %q (directory: %q)", name, got[name], content, got)
		}
		if strings.HasPrefix(name, "cns_") && !hermes.MatchString(name) {
			t.Errorf("%s: not an hourly name", name)
		}
	}
}

// The SAPI manifest renders config.json where the SMF service reads it
// and reloads cns (svcadm refresh: the manifest's SIGHUP), never
// restarts it; the SMF manifest runs the method script as cns:cns with
// net_privaddr (port 53) after mdata:execute, the network, the local
// file systems and config-agent, as a contract service.
func TestServiceManifests(t *testing.T) {
	var sapi struct {
		Name, Path string
		PostCmd    string `json:"post_cmd"`
	}
	raw, err := os.ReadFile("sapi_manifests/cns/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &sapi); err != nil {
		t.Fatal(err)
	}
	const fmri = "svc:/triton/application/cns:default"
	if sapi.Name != "cns" || sapi.Path != "/opt/triton/cns/etc/config.json" {
		t.Errorf("SAPI manifest %+v", sapi)
	}
	if !strings.HasPrefix(sapi.PostCmd, "/usr/sbin/svcadm refresh "+fmri+";") || strings.Contains(sapi.PostCmd, "restart") {
		t.Errorf("post_cmd %q: want svcadm refresh %s, never a restart", sapi.PostCmd, fmri)
	}

	var bundle struct {
		Service struct {
			Name    string `xml:"name,attr"`
			Default struct {
				Enabled string `xml:"enabled,attr"`
			} `xml:"create_default_instance"`
			Deps []struct {
				Grouping string `xml:"grouping,attr"`
				FMRI     struct {
					Value string `xml:"value,attr"`
				} `xml:"service_fmri"`
			} `xml:"dependency"`
			Methods []struct {
				Name    string `xml:"name,attr"`
				Exec    string `xml:"exec,attr"`
				Context struct {
					Cred struct {
						User       string `xml:"user,attr"`
						Group      string `xml:"group,attr"`
						Privileges string `xml:"privileges,attr"`
					} `xml:"method_credential"`
				} `xml:"method_context"`
			} `xml:"exec_method"`
			Groups []struct {
				Name  string `xml:"name,attr"`
				Props []struct {
					Name  string `xml:"name,attr"`
					Value string `xml:"value,attr"`
				} `xml:"propval"`
			} `xml:"property_group"`
		} `xml:"service"`
	}
	raw, err = os.ReadFile("cns.xml")
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(raw, &bundle); err != nil {
		t.Fatal(err)
	}
	svc := bundle.Service
	if "svc:/"+svc.Name+":default" != fmri || svc.Default.Enabled != "true" {
		t.Errorf("service %q (default instance enabled %q), want %s", svc.Name, svc.Default.Enabled, fmri)
	}
	mdata, deps := false, ""
	for _, d := range svc.Deps {
		mdata = mdata || (d.FMRI.Value == "svc:/smartdc/mdata:execute" && d.Grouping == "require_all")
		deps += d.FMRI.Value + " "
	}
	if !mdata {
		t.Error("no require_all dependency on svc:/smartdc/mdata:execute")
	}
	for _, want := range []string{"svc:/network/physical", "svc:/system/filesystem/local", "config-agent"} {
		if !strings.Contains(deps, want) {
			t.Errorf("no dependency on %s", want)
		}
	}
	methods := map[string]string{}
	for _, m := range svc.Methods {
		methods[m.Name] = m.Exec
		if c := m.Context.Cred; m.Name == "start" && (c.User != "cns" || c.Group != "cns" || !strings.Contains(c.Privileges, "net_privaddr")) {
			t.Errorf("start runs as %s:%s with %q, want cns:cns with net_privaddr", c.User, c.Group, c.Privileges)
		}
	}
	if !strings.HasPrefix(methods["start"], "/opt/triton/cns/smf/method/cns") {
		t.Errorf("start method %q, want the method script", methods["start"])
	}
	if methods["refresh"] != ":kill -HUP" {
		t.Errorf("refresh method %q, want :kill -HUP (cns reloads on SIGHUP)", methods["refresh"])
	}
	duration := ""
	for _, g := range svc.Groups {
		for _, p := range g.Props {
			if g.Name == "startd" && p.Name == "duration" {
				duration = p.Value
			}
		}
	}
	if duration != "contract" {
		t.Errorf("startd/duration %q, want contract", duration)
	}
	lib, _ := os.ReadFile("boot/lib/cns.sh")
	if !strings.Contains(string(lib), "CNS_FMRI="+fmri+"\n") {
		t.Errorf("boot/lib/cns.sh enables another FMRI than %s", fmri)
	}
}
