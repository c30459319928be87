package smf

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
)

// TestMain removes the release the tests built, if any.
func TestMain(m *testing.M) {
	code := m.Run()
	if release.dir != "" {
		os.RemoveAll(release.dir)
	}
	os.Exit(code)
}

var release struct {
	once    sync.Once
	dir     string // scratch directory
	tarball string
	tree    string // the tarball, unpacked
	err     error
}

// releaseBuild runs the one documented command, build-release.sh, for
// the host (the binary inside must run here), once, and unpacks it.
func releaseBuild(t *testing.T) (tarball, tree string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds the release with build-release.sh")
	}
	release.once.Do(func() {
		if release.dir, release.err = os.MkdirTemp("", "cns-release"); release.err != nil {
			return
		}
		cmd := exec.Command("./build-release.sh", filepath.Join(release.dir, "out"))
		cmd.Env = append(os.Environ(), "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH, "VERSION=1.2.3-test")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			release.err = fmt.Errorf("build-release.sh: %v\n%s", err, stderr.String())
			return
		}
		release.tarball = strings.TrimSpace(string(out))
		release.tree = filepath.Join(release.dir, "tree")
		os.MkdirAll(release.tree, 0o755)
		if out, err := exec.Command("tar", "-xzf", release.tarball, "-C", release.tree).CombinedOutput(); err != nil {
			release.err = fmt.Errorf("unpack: %v\n%s", err, out)
		}
	})
	if release.err != nil {
		t.Fatal(release.err)
	}
	return release.tarball, release.tree
}

// releasedBinary is bin/cns from the release tarball.
func releasedBinary(t *testing.T) string {
	_, tree := releaseBuild(t)
	return filepath.Join(tree, "root/opt/triton/cns/bin/cns")
}

// The tarball holds exactly the layout the image build expects, with
// the right modes and owners, and its binary runs as cns and as cnsadm.
func TestReleaseTarball(t *testing.T) {
	tarball, tree := releaseBuild(t)
	if filepath.Base(tarball) != "cns-pkg-1.2.3-test.tar.gz" {
		t.Errorf("tarball %s", tarball)
	}
	// The layout of the reference's Makefile: the service under
	// /opt/triton/cns, what every core zone has at /opt/smartdc/boot
	// (there: sdc-scripts, then the repository's boot/), cnsadm and the
	// man pages under /opt/local.
	want := map[string]string{
		"root/":                                                      "d755",
		"root/opt/":                                                  "d755",
		"root/opt/local/":                                            "d755",
		"root/opt/local/bin/":                                        "d755",
		"root/opt/local/bin/cnsadm":                                  "-> /opt/triton/cns/bin/cnsadm",
		"root/opt/local/man/":                                        "d755",
		"root/opt/local/man/man1/":                                   "d755",
		"root/opt/local/man/man1/cnsadm.1":                           "f644",
		"root/opt/local/man/man5/":                                   "d755",
		"root/opt/local/man/man5/cns.json.5":                         "f644",
		"root/opt/local/man/man8/":                                   "d755",
		"root/opt/local/man/man8/cns.8":                              "f644",
		"root/opt/smartdc/":                                          "d755",
		"root/opt/smartdc/boot/":                                     "d755",
		"root/opt/smartdc/boot/configure.sh":                         "f755",
		"root/opt/smartdc/boot/etc/":                                 "d755",
		"root/opt/smartdc/boot/etc/root.bashrc":                      "f644",
		"root/opt/smartdc/boot/etc/security/":                        "d755",
		"root/opt/smartdc/boot/etc/security/exec_attr.d/":            "d755",
		"root/opt/smartdc/boot/etc/security/exec_attr.d/mdata":       "f644",
		"root/opt/smartdc/boot/etc/security/prof_attr.d/":            "d755",
		"root/opt/smartdc/boot/etc/security/prof_attr.d/mdata":       "f644",
		"root/opt/smartdc/boot/lib/":                                 "d755",
		"root/opt/smartdc/boot/lib/cns.sh":                           "f644",
		"root/opt/smartdc/boot/lib/util.sh":                          "f644",
		"root/opt/smartdc/boot/sbin/":                                "d755",
		"root/opt/smartdc/boot/sbin/postlogrotate.sh":                "f755",
		"root/opt/smartdc/boot/setup.sh":                             "f755",
		"root/opt/triton/":                                           "d755",
		"root/opt/triton/cns/":                                       "d755",
		"root/opt/triton/cns/bin/":                                   "d755",
		"root/opt/triton/cns/bin/cns":                                "f755",
		"root/opt/triton/cns/bin/cnsadm":                             "-> cns",
		"root/opt/triton/cns/etc/":                                   "d755",
		"root/opt/triton/cns/sapi_manifests/":                        "d755",
		"root/opt/triton/cns/sapi_manifests/cns/":                    "d755",
		"root/opt/triton/cns/sapi_manifests/cns/manifest.json":       "f644",
		"root/opt/triton/cns/sapi_manifests/cns/template":            "f644",
		"root/opt/triton/cns/sapi_manifests/registrar/":              "d755",
		"root/opt/triton/cns/sapi_manifests/registrar/manifest.json": "f644",
		"root/opt/triton/cns/sapi_manifests/registrar/template":      "f644",
		"root/opt/triton/cns/smf/":                                   "d755",
		"root/opt/triton/cns/smf/manifests/":                         "d755",
		"root/opt/triton/cns/smf/manifests/cns.xml":                  "f644",
		"root/opt/triton/cns/smf/method/":                            "d755",
		"root/opt/triton/cns/smf/method/cns":                         "f755",
		"site/":                                                      "d755",
	}
	got := tarEntries(t, tarball)
	var names []string
	for n := range want {
		names = append(names, n)
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if got[n] != want[n] {
			t.Errorf("%s: %q, want %q", n, got[n], want[n])
		}
	}
	// The shipped files are the repository's.
	for src, dst := range map[string]string{
		"cns.xml":                                "opt/triton/cns/smf/manifests/cns.xml",
		"method/cns":                             "opt/triton/cns/smf/method/cns",
		"sapi_manifests/cns/template":            "opt/triton/cns/sapi_manifests/cns/template",
		"sapi_manifests/cns/manifest.json":       "opt/triton/cns/sapi_manifests/cns/manifest.json",
		"sapi_manifests/registrar/template":      "opt/triton/cns/sapi_manifests/registrar/template",
		"sapi_manifests/registrar/manifest.json": "opt/triton/cns/sapi_manifests/registrar/manifest.json",
		"boot/setup.sh":                          "opt/smartdc/boot/setup.sh",
		"boot/configure.sh":                      "opt/smartdc/boot/configure.sh",
		"boot/lib/util.sh":                       "opt/smartdc/boot/lib/util.sh",
		"boot/lib/cns.sh":                        "opt/smartdc/boot/lib/cns.sh",
		"boot/sbin/postlogrotate.sh":             "opt/smartdc/boot/sbin/postlogrotate.sh",
		"boot/etc/root.bashrc":                   "opt/smartdc/boot/etc/root.bashrc",
		"boot/etc/security/exec_attr.d/mdata":    "opt/smartdc/boot/etc/security/exec_attr.d/mdata",
		"boot/etc/security/prof_attr.d/mdata":    "opt/smartdc/boot/etc/security/prof_attr.d/mdata",
		"man/cnsadm.1":                           "opt/local/man/man1/cnsadm.1",
		"man/cns.json.5":                         "opt/local/man/man5/cns.json.5",
		"man/cns.8":                              "opt/local/man/man8/cns.8",
	} {
		a, _ := os.ReadFile(src)
		b, err := os.ReadFile(filepath.Join(tree, "root", dst))
		if err != nil || string(a) != string(b) {
			t.Errorf("/%s in the tarball differs from smf/%s (%v)", dst, src, err)
		}
	}
	bin := filepath.Join(tree, "root/opt/triton/cns/bin")
	out, err := exec.Command(filepath.Join(bin, "cns"), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "cns 1.2.3-test (") {
		t.Errorf("cns version: %v %q, want the stamped version and commit", err, out)
	}
	// cnsadm is `cns adm`, chosen by argv[0] through the symlink.
	out, _ = exec.Command(filepath.Join(bin, "cnsadm"), "--help").CombinedOutput()
	if !strings.Contains(string(out), "cnsadm") || strings.Contains(string(out), "Usage: cns ") {
		t.Errorf("cnsadm --help does not run as cnsadm:\n%s", out)
	}
}

// tarEntries lists a gzip tarball: "dNNN"/"fNNN" (type and mode) or
// "-> target" for a symlink; every entry must be root's.
func tarEntries(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	entries := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return entries
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d, want 0:0", h.Name, h.Uid, h.Gid)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			entries[h.Name] = fmt.Sprintf("d%o", h.Mode&0o7777)
		case tar.TypeReg:
			entries[h.Name] = fmt.Sprintf("f%o", h.Mode&0o7777)
		case tar.TypeSymlink:
			entries[h.Name] = "-> " + h.Linkname
		default:
			entries[h.Name] = fmt.Sprintf("type %c", h.Typeflag)
		}
	}
}
