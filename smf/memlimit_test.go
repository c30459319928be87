package smf

import (
	"math"
	"runtime/debug"
	"testing"
	"testing/fstest"
)

// The heap's limit: GOMEMLIMIT as the runtime took it, else 3/4 of the
// smallest cgroup memory limit on the way up from the process's cgroup,
// else none. The file systems are the real layouts' shapes: a cgroup v2
// host (systemd: the service's memory.max, its slice's above it), a
// hybrid host (v1 memory controller beside a v2 mount without it, as the
// machine these tests were written on), a container (cgroup namespace:
// its own cgroup is /).
func TestFindMemoryLimit(t *testing.T) {
	const gib = int64(1) << 30
	v2mounts := "25 30 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
	hybridMounts := "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
		"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
		"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	hybridGroups := "4:memory:/process_api/abc\n1:cpu:/\n0::/\n"
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name    string
		env     string
		current int64
		files   fstest.MapFS
		want    memoryLimit
	}{{
		name: "GOMEMLIMIT", env: "768MiB", current: 768 << 20,
		files: fstest.MapFS{
			"proc/self/cgroup":    file("0::/system.slice/cns.service\n"),
			"proc/self/mountinfo": file(v2mounts),
			"sys/fs/cgroup/system.slice/cns.service/memory.max": file("2147483648\n"),
		},
		want: memoryLimit{limit: 768 << 20, from: "GOMEMLIMIT"},
	}, {
		name: "v2 service limit",
		files: fstest.MapFS{
			"proc/self/cgroup":    file("0::/system.slice/cns.service\n"),
			"proc/self/mountinfo": file(v2mounts),
			"sys/fs/cgroup/system.slice/cns.service/memory.max": file("2147483648\n"),
			"sys/fs/cgroup/system.slice/memory.max":             file("max\n"),
		},
		want: memoryLimit{limit: 3 * gib / 2, cap: 2 * gib, from: "/sys/fs/cgroup/system.slice/cns.service/memory.max"},
	}, {
		name: "v2 slice limit above an unlimited service",
		files: fstest.MapFS{
			"proc/self/cgroup":    file("0::/system.slice/cns.service\n"),
			"proc/self/mountinfo": file(v2mounts),
			"sys/fs/cgroup/system.slice/cns.service/memory.max": file("max\n"),
			"sys/fs/cgroup/system.slice/memory.max":             file("1073741824\n"),
		},
		want: memoryLimit{limit: 3 * gib / 4, cap: gib, from: "/sys/fs/cgroup/system.slice/memory.max"},
	}, {
		name: "v2 the smaller of two",
		files: fstest.MapFS{
			"proc/self/cgroup":    file("0::/system.slice/cns.service\n"),
			"proc/self/mountinfo": file(v2mounts),
			"sys/fs/cgroup/system.slice/cns.service/memory.max": file("4294967296\n"),
			"sys/fs/cgroup/system.slice/memory.max":             file("1073741824\n"),
		},
		want: memoryLimit{limit: 3 * gib / 4, cap: gib, from: "/sys/fs/cgroup/system.slice/memory.max"},
	}, {
		name: "v2 no limit",
		files: fstest.MapFS{
			"proc/self/cgroup":    file("0::/user.slice/user-0.slice/session-1.scope\n"),
			"proc/self/mountinfo": file(v2mounts),
			"sys/fs/cgroup/user.slice/user-0.slice/session-1.scope/memory.max": file("max\n"),
			"sys/fs/cgroup/user.slice/user-0.slice/memory.max":                 file("max\n"),
			"sys/fs/cgroup/user.slice/memory.max":                              file("max\n"),
		},
	}, {
		name: "container: its cgroup is the namespace's root",
		files: fstest.MapFS{
			"proc/self/cgroup":               file("0::/\n"),
			"proc/self/mountinfo":            file("600 590 0:27 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n"),
			"sys/fs/cgroup/memory.max":       file("536870912\n"),
			"sys/fs/cgroup/memory.swap.max":  file("0\n"),
			"sys/fs/cgroup/cgroup.procs":     file("1\n"),
			"sys/fs/cgroup/memory.peak":      file("1\n"),
			"sys/fs/cgroup/cgroup.max.depth": file("max\n"),
		},
		want: memoryLimit{limit: 384 << 20, cap: 512 << 20, from: "/sys/fs/cgroup/memory.max"},
	}, {
		name: "hybrid: v1 memory, limited",
		files: fstest.MapFS{
			"proc/self/cgroup":    file(hybridGroups),
			"proc/self/mountinfo": file(hybridMounts),
			"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": file("3221225472\n"),
			"sys/fs/cgroup/memory/process_api/memory.limit_in_bytes":     file("9223372036854771712\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                 file("9223372036854771712\n"),
		},
		want: memoryLimit{limit: 9 * gib / 4, cap: 3 * gib, from: "/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes"},
	}, {
		name: "hybrid: v1 memory, unlimited",
		files: fstest.MapFS{
			"proc/self/cgroup":    file(hybridGroups),
			"proc/self/mountinfo": file(hybridMounts),
			"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": file("9223372036854771712\n"),
			"sys/fs/cgroup/memory/process_api/memory.limit_in_bytes":     file("9223372036854771712\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                 file("9223372036854771712\n"),
		},
	}, {
		name:  "no cgroups (not Linux)",
		files: fstest.MapFS{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := findMemoryLimit(tc.env, tc.current, tc.files); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/x\0`: `/x\0`, `\134`: `\`} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// HeapLimit reports the limit in force, and 0 for none (the runtime's
// math.MaxInt64).
func TestHeapLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	if got := HeapLimit(); got != 0 {
		t.Errorf("no limit: HeapLimit %d, want 0", got)
	}
	debug.SetMemoryLimit(768 << 20)
	if got := HeapLimit(); got != 768<<20 {
		t.Errorf("a limit of 768 MiB: HeapLimit %d", got)
	}
}
