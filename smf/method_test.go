package smf

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The start method bounds cns's heap by the zone's memory cap:
// GOMEMLIMIT is 3/4 of sdc:max_physical_memory, read as user cns through
// pfexec (the stand-in mdata-get refuses a caller without the "Metadata
// Reader" profile's file_dac_search, as the real one cannot reach the
// metadata socket then); an operator's GOMEMLIMIT is kept; without a cap
// cns starts unbounded. The value is one Go accepts.
func TestMethodMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the SMF method")
	}
	for _, tc := range []struct {
		name, cap, preset string
		pfexec            bool
		want              string
	}{
		{name: "sdc_1024", cap: "1024", pfexec: true, want: "768MiB"},
		{name: "sdc_4096", cap: "4096", pfexec: true, want: "3072MiB"},
		{name: "operator's own", cap: "1024", pfexec: true, preset: "900MiB", want: "900MiB"},
		{name: "no profile", cap: "1024", want: ""},
		{name: "not an SDC zone", pfexec: true, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			record := filepath.Join(root, "started")
			write := func(path, body string) {
				path = filepath.Join(root, path)
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			write("lib/svc/share/smf_include.sh", "SMF_EXIT_OK=0\nSMF_EXIT_ERR_FATAL=95\nSMF_EXIT_ERR_CONFIG=96\n")
			write("opt/triton/cns/etc/config.json", "{}\n")
			write("opt/triton/cns/bin/cns", "#!/bin/sh\necho \"GOMEMLIMIT=${GOMEMLIMIT:-} $*\" >>"+record+"\n")
			mdata := "#!/bin/sh\n[ \"$STANDIN_PRIVS\" = file_dac_search ] || { echo 'ERROR: could not initialise protocol: Could not find metadata socket.' >&2; exit 2; }\n"
			if tc.cap != "" {
				mdata += "[ \"$1\" = sdc:max_physical_memory ] && echo " + tc.cap + " && exit 0\n"
			}
			write("usr/sbin/mdata-get", mdata+"exit 1\n")
			if tc.pfexec {
				write("usr/bin/pfexec", "#!/bin/sh\nSTANDIN_PRIVS=file_dac_search exec \"$@\"\n")
			}
			cmd := exec.Command("sh", "method/cns", "start")
			cmd.Env = []string{"PATH=/usr/bin:/bin", "ZONE_ROOT=" + root, "SMF_FMRI=svc:/triton/application/cns:default"}
			if tc.preset != "" {
				cmd.Env = append(cmd.Env, "GOMEMLIMIT="+tc.preset)
			}
			// Returns once the backgrounded cns has exited too: it holds
			// the output.
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("method start: %v\n%s", err, out)
			}
			got, _ := os.ReadFile(record)
			config := filepath.Join(root, "opt/triton/cns/etc/config.json")
			if want := "GOMEMLIMIT=" + tc.preset + " serve -c " + config + " --check\nGOMEMLIMIT=" + tc.want + " serve -c " + config + "\n"; string(got) != want {
				t.Errorf("cns started as:\n%s\nwant:\n%s\nmethod output:\n%s", got, want, out)
			}
		})
	}
	cmd := exec.Command(releasedBinary(t), "version")
	cmd.Env = append(os.Environ(), "GOMEMLIMIT=768MiB")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "cns ") {
		t.Errorf("cns with GOMEMLIMIT=768MiB: %v %s", err, out)
	}
}
