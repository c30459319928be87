package smf

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The zone image's recipe, build-image.sh, cannot run here (eng's
// buildimage needs SmartOS: ZFS, zones, pkgsrc). The tests run it with a
// stand-in buildimage that records its arguments and exports the tree it
// was given, which is what the image's root holds; the boot tests then
// boot that tree.

// agentTarballs writes stand-ins of the three agents' release tarballs,
// laid out as each agent's `make release` lays out its own: config-agent
// as config-agent/ (extracted into /opt/smartdc), amon's agent as
// amon-agent/ (into /opt), registrar as root/opt/smartdc/registrar/ and
// site/ (into the image's top). Their programs are the boot tests'
// stand-ins: config-agent's node runs the stand-in renderer
// (testdata/hogan/configagent.js, with the real hogan.js), amon-agent's
// postinstall records that it ran.
func agentTarballs(t *testing.T, dir string) {
	if testing.Short() {
		t.Skip("-short: builds agent tarballs with tar")
	}
	t.Helper()
	src := t.TempDir()
	write := func(path, body string, mode os.FileMode) {
		t.Helper()
		path = filepath.Join(src, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	// $CNS_TEST_CALLS is the log every stand-in appends to.
	write("config/config-agent/build/node/bin/node", `#!/bin/sh
echo "node $*" >>"$CNS_TEST_CALLS"
[ "$2" = -s ] && [ "${1##*/}" = agent.js ] || { echo "stand-in node runs only agent.js -s" >&2; exit 1; }
exec "$CNS_TEST_NODE" "$CNS_TEST_CONFIGAGENT"
`, 0o755)
	write("config/config-agent/agent.js", "// config-agent: the stand-in node runs testdata/hogan/configagent.js\n", 0o644)
	write("config/config-agent/smf/manifests/config-agent.xml",
		`<service name="smartdc/application/config-agent"><exec_method name="start" exec="@@PREFIX@@/bin/agent.sh"/></service>`+"\n", 0o644)
	write("amon/amon-agent/pkg/postinstall.sh", "#!/bin/sh\necho \"amon-agent postinstall in $(pwd)\" >>\"$CNS_TEST_CALLS\"\n", 0o755)
	write("registrar/root/opt/smartdc/registrar/main.js", "// registrar\n", 0o644)
	write("registrar/root/opt/smartdc/registrar/smf/manifests/registrar.xml",
		`<service name="manta/application/registrar"><create_default_instance enabled="false"/></service>`+"\n", 0o644)
	os.MkdirAll(filepath.Join(src, "registrar/site"), 0o755)
	for name, from := range map[string]string{
		"amon-agent-master-20240101T000000Z-g1234567.tgz":        "amon",
		"config-agent-master-20240101T000000Z-g1234567.tar.gz":   "config",
		"registrar-pkg-master-20240101T000000Z-g1234567.tar.gz":  "registrar",
		"registrar-pkg-master-20230101T000000Z-gold0000.tar.gz":  "", // older: not taken
		"config-agent-master-20230101T000000Z-gold0000.tar.gz":   "",
		"unrelated-pkg-master-20240101T000000Z-g1234567.tar.gz":  "",
		"amon-relay-master-20240101T000000Z-g1234567.tgz":        "",
		"registrar-pkg-master-20240101T000000Z-g1234567.tar.bz2": "",
	} {
		args := []string{"-czf", filepath.Join(dir, name), "-C", filepath.Join(src, from), "."}
		if from == "" {
			args = []string{"-czf", filepath.Join(dir, name), "-T", "/dev/null"}
		}
		if out, err := exec.Command("tar", args...).CombinedOutput(); err != nil {
			t.Fatalf("tar %s: %v\n%s", name, err, out)
		}
	}
}

var image struct {
	once    sync.Once
	version string   // the image's version: the tarball's
	args    []string // buildimage's arguments
	root    string   // the tree buildimage was given: the image's root
	out     string   // build-image.sh's OUTDIR
	stdout  string
	err     error
}

// imageBuild runs build-image.sh once, on the release tarball and the
// stand-in agents, with the stand-in buildimage.
func imageBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs build-image.sh")
	}
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("build-image.sh runs as root (buildimage needs it, and the image is root's): run the tests as root, as CI does")
	}
	tarball, _ := releaseBuild(t)
	image.once.Do(func() {
		dir, err := os.MkdirTemp(release.dir, "image")
		if err != nil {
			image.err = err
			return
		}
		// A version of its own: buildimage writes to /tmp, by version.
		image.version = "1.2.3-" + filepath.Base(dir)
		tb := filepath.Join(dir, "cns-pkg-"+image.version+".tar.gz")
		agents := filepath.Join(dir, "agents")
		image.root, image.out = filepath.Join(dir, "root"), filepath.Join(dir, "out")
		argsFile := filepath.Join(dir, "buildimage.args")
		buildimage := filepath.Join(dir, "buildimage")
		os.MkdirAll(agents, 0o755)
		if out, err := exec.Command("cp", tarball, tb).CombinedOutput(); err != nil {
			image.err = fmt.Errorf("cp: %v %s", err, out)
			return
		}
		agentTarballs(t, agents)
		// The stand-in: one argument a line; the -d tree copied out, as
		// the image's root; the three files the real one writes to /tmp.
		os.WriteFile(buildimage, []byte(`#!/bin/bash
set -e
printf '%s\n' "$@" >`+argsFile+`
while getopts "d:i:m:p:P:S:Mau" o; do
	case $o in d) dir=$OPTARG ;; P) prefix=$OPTARG ;; m) version=$(printf '%s' "$OPTARG" | sed -n 's/.*"version": "\([^"]*\)".*/\1/p') ;; esac
done
if find "$dir" ! -uid 0 | grep -q .; then echo "stand-in buildimage: files not owned by root" >&2; exit 1; fi
cp -a "$dir" `+image.root+`
for ext in zfs.gz imgmanifest pkgaudit; do echo "$ext" >"/tmp/$prefix-$version.$ext"; done
`), 0o755)
		cmd := exec.Command("./build-image.sh", tb, agents, image.out)
		cmd.Env = append(os.Environ(), "BUILDIMAGE="+buildimage)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		image.stdout = string(out)
		if err != nil {
			image.err = fmt.Errorf("build-image.sh: %v\n%s", err, stderr.String())
			return
		}
		raw, err := os.ReadFile(argsFile)
		if err != nil {
			image.err = err
			return
		}
		image.args = strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	})
	if image.err != nil {
		t.Fatal(image.err)
	}
}

// The recipe is the reference's (triton-cns Makefile: the origin image,
// the name, the agents) and eng's buildimage call (Makefile.targ), and
// the tree it hands buildimage holds the release and every agent where
// the boot scripts look for them.
func TestImageRecipe(t *testing.T) {
	imageBuild(t)
	flag := func(f string) string {
		i := slices.Index(image.args, f)
		if i < 0 || i+1 >= len(image.args) {
			t.Errorf("buildimage without %s: %q", f, image.args)
			return ""
		}
		return image.args[i+1]
	}
	if got := flag("-i"); got != "502eeef2-8267-489f-b19c-a206906f57ef" {
		t.Errorf("origin image %s, want triton-origin-x86_64-21.4.0 (502eeef2-8267-489f-b19c-a206906f57ef)", got)
	}
	if got := flag("-P"); got != "cns-zfs" {
		t.Errorf("-P %s, want cns-zfs", got)
	}
	var manifest struct {
		Name, Description, Version string
		Tags                       map[string]any
	}
	if err := json.Unmarshal([]byte(flag("-m")), &manifest); err != nil || manifest.Name != "cns" ||
		manifest.Version != image.version || manifest.Tags["smartdc_service"] != true || manifest.Description == "" {
		t.Errorf("image manifest %+v (%v): want name cns, version %s, tags.smartdc_service", manifest, err, image.version)
	}
	for _, f := range []string{"-M", "-a", "-S"} {
		if !slices.Contains(image.args, f) {
			t.Errorf("buildimage without %s (motd, pkg audit, its source): %q", f, image.args)
		}
	}
	if slices.Contains(image.args, "-p") {
		t.Errorf("pkgsrc packages %q: cns needs none beyond the origin image's", flag("-p"))
	}
	// The agents, each where the boot scripts look for it.
	for _, f := range []string{
		"opt/smartdc/config-agent/agent.js", "opt/smartdc/config-agent/build/node/bin/node",
		"opt/smartdc/registrar/smf/manifests/registrar.xml", "opt/amon-agent/pkg/postinstall.sh",
		"opt/smartdc/boot/setup.sh", "opt/smartdc/boot/lib/util.sh", "opt/triton/cns/bin/cns",
		"opt/local/man/man1/cnsadm.1",
	} {
		if _, err := os.Stat(filepath.Join(image.root, f)); err != nil {
			t.Errorf("the image lacks /%s", f)
		}
	}
	for _, ext := range []string{"zfs.gz", "imgmanifest", "pkgaudit"} {
		p := filepath.Join(image.out, "cns-zfs-"+image.version+"."+ext)
		if _, err := os.Stat(p); err != nil || !strings.Contains(image.stdout, p+"\n") {
			t.Errorf("%s not written or not printed (%v):\n%s", p, err, image.stdout)
		}
		if _, err := os.Stat("/tmp/cns-zfs-" + image.version + "." + ext); err == nil {
			t.Errorf("/tmp/cns-zfs-%s.%s left behind", image.version, ext)
		}
	}

	// An agent's tarball missing: refused by name, before buildimage runs.
	agents := t.TempDir()
	agentTarballs(t, agents)
	for _, f := range []string{"registrar-pkg-master-20240101T000000Z-g1234567.tar.gz", "registrar-pkg-master-20230101T000000Z-gold0000.tar.gz"} {
		os.Remove(filepath.Join(agents, f))
	}
	tarball, _ := releaseBuild(t)
	cmd := exec.Command("./build-image.sh", tarball, agents, t.TempDir())
	cmd.Env = append(os.Environ(), "BUILDIMAGE=/bin/false")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "registrar-pkg-*.tar.gz") {
		t.Errorf("no registrar tarball: %v\n%s", err, out)
	}
}
