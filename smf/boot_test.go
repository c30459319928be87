package smf

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The boot scripts and the SMF method are valid sh/bash and pass
// shellcheck (Debian package shellcheck).
func TestBootScriptsCheck(t *testing.T) {
	for _, c := range [][]string{
		{"bash", "-n", "boot/setup.sh"}, {"bash", "-n", "boot/configure.sh"}, {"bash", "-n", "boot/lib.sh"},
		{"bash", "-n", "build-release.sh"}, {"sh", "-n", "method/cns"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Skip("shellcheck not installed (Debian package shellcheck); syntax checked only")
	}
	// -x follows the scripts' `. lib.sh` (their source= directive).
	cmd := exec.Command("shellcheck", "-x", "setup.sh", "configure.sh", "lib.sh")
	cmd.Dir = "boot"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("shellcheck boot: %v\n%s", err, out)
	}
	if out, err := exec.Command("shellcheck", "method/cns", "build-release.sh").CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// The set-up steps, run against stand-ins for the illumos commands that
// record what they were asked: the delegated dataset mounted at /data,
// group and user cns, the db directory cns's alone (0700), config-agent
// pointed at the image's manifests and run once, the service's log
// rotated, the service imported and enabled.
func TestBootSetupSteps(t *testing.T) {
	dir := t.TempDir()
	bin, data, agent := filepath.Join(dir, "bin"), filepath.Join(dir, "data"), filepath.Join(dir, "config-agent")
	calls := filepath.Join(dir, "calls")
	stub := func(path, body string) {
		os.MkdirAll(filepath.Dir(path), 0o755)
		script := "#!/bin/bash\necho \"$(basename \"$0\") $*\" >>" + calls + "\n" + body + "\n"
		if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stub(filepath.Join(bin, "zonename"), "echo z1")
	stub(filepath.Join(bin, "zfs"), `[ "$1" = get ] && echo /zones/z1/data; exit 0`)
	stub(filepath.Join(bin, "getent"), "exit 2") // no such user or group yet
	stub(filepath.Join(bin, "mdata-get"), `case "$1" in sapi-url) echo http://10.0.0.5;; sdc:datacenter_name) echo us-west-1;; *) exit 1;; esac`)
	stub(filepath.Join(bin, "crontab"), `[ "$1" = -l ] && printf '10 3 * * * /usr/sbin/logadm\n15 * * * * /opt/other\n'; [ "$1" = -l ] || cat >>`+calls+`.crontab`)
	for _, c := range []string{"groupadd", "useradd", "chown", "svcadm", "svccfg", "logadm"} {
		stub(filepath.Join(bin, c), "exit 0")
	}
	stub(filepath.Join(agent, "build/node/bin/node"), "exit 0")
	os.MkdirAll(filepath.Join(agent, "smf/manifests"), 0o755)
	os.WriteFile(filepath.Join(agent, "smf/manifests/config-agent.xml"), []byte(`<exec_method exec="@@PREFIX@@/bin/agent.sh"/>`), 0o644)

	script := `set -o errexit -o pipefail -o nounset
. ./boot/lib.sh
cns_mount_data
cns_user
cns_db_dir
cns_config_agent
cns_log_rotation_add cns '/var/svc/log/*triton-application-cns*.log' 1g
cns_service`
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin", "CNS_DATA="+data, "CONFIG_AGENT="+agent)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("set-up steps: %v\n%s", err, out)
	}
	log, _ := os.ReadFile(calls)
	for _, want := range []string{
		"zfs set mountpoint=" + data + " zones/z1/data",
		"groupadd cns",
		"useradd -g cns -d /opt/triton/cns -s /usr/bin/false -P Metadata Reader cns",
		"chown cns:cns " + data + "/cns",
		"node " + agent + "/agent.js -s",
		"svccfg import " + agent + "/smf/manifests/config-agent.xml",
		"svcadm enable svc:/smartdc/application/config-agent:default",
		"logadm -w cns -C 168 -S 1g -c -p 1h -t /var/log/sdc/upload/cns_$nodename_%FT%H:%M:%S.log /var/svc/log/*triton-application-cns*.log",
		"svccfg import /opt/triton/cns/smf/manifests/cns.xml",
		"svcadm enable svc:/triton/application/cns:default",
	} {
		if !strings.Contains(string(log), want+"\n") {
			t.Errorf("no call %q; calls:\n%s", want, log)
		}
	}
	if fi, err := os.Stat(filepath.Join(data, "cns")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("db directory: %v %v, want mode 0700", fi, err)
	}
	var agentCfg struct {
		SAPI              struct{ URL string }
		LocalManifestDirs []string
	}
	raw, _ := os.ReadFile(filepath.Join(agent, "etc/config.json"))
	if err := json.Unmarshal(raw, &agentCfg); err != nil || agentCfg.SAPI.URL != "http://10.0.0.5" ||
		len(agentCfg.LocalManifestDirs) != 1 || agentCfg.LocalManifestDirs[0] != "/opt/triton/cns" {
		t.Errorf("config-agent config: %v %s", err, raw)
	}
	if m, _ := os.ReadFile(filepath.Join(agent, "smf/manifests/config-agent.xml")); !strings.Contains(string(m), agent+"/bin/agent.sh") {
		t.Errorf("config-agent manifest's @@PREFIX@@ not replaced: %s", m)
	}
}

// The SAPI manifest renders config.json where the SMF service reads it
// and reloads cns (svcadm refresh: the manifest's SIGHUP), never
// restarts it; the manifest runs as cns:cns after mdata:execute.
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
						User  string `xml:"user,attr"`
						Group string `xml:"group,attr"`
					} `xml:"method_credential"`
				} `xml:"method_context"`
			} `xml:"exec_method"`
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
	mdata := false
	for _, d := range svc.Deps {
		mdata = mdata || (d.FMRI.Value == "svc:/smartdc/mdata:execute" && d.Grouping == "require_all")
	}
	if !mdata {
		t.Error("no require_all dependency on svc:/smartdc/mdata:execute")
	}
	methods := map[string]string{}
	for _, m := range svc.Methods {
		methods[m.Name] = m.Exec
		if m.Name == "start" && (m.Context.Cred.User != "cns" || m.Context.Cred.Group != "cns") {
			t.Errorf("start runs as %s:%s, want cns:cns", m.Context.Cred.User, m.Context.Cred.Group)
		}
	}
	if methods["refresh"] != ":kill -HUP" {
		t.Errorf("refresh method %q, want :kill -HUP (cns reloads on SIGHUP)", methods["refresh"])
	}
	lib, _ := os.ReadFile("boot/lib.sh")
	if !strings.Contains(string(lib), "CNS_FMRI="+fmri+"\n") {
		t.Errorf("boot/lib.sh enables another FMRI than %s", fmri)
	}
}
