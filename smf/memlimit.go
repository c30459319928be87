package smf

import (
	"bufio"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

// The Go heap's soft limit (runtime/debug.SetMemoryLimit). Near it the
// collector runs more often, so a data center bigger than the memory cns
// was given slows cns down instead of taking it past that memory and
// getting it killed. Where the limit comes from, first found first:
//
//   - GOMEMLIMIT in the environment: an operator's, or the SMF method's,
//     which sets it from the zone's memory cap (sdc:max_physical_memory);
//     the Go runtime applies it itself, cns logs it.
//   - Linux: the memory limit of the process's cgroup or of a cgroup above
//     it (cgroup v2 memory.max, v1 memory.limit_in_bytes; a systemd unit's
//     MemoryMax=, a container's limit); the heap gets memoryLimitShare of
//     it.
//   - none: the heap is not bounded.
//
// The share left over is for what the limit does not count and the cap
// does: the db file's mapped pages, thread stacks and the runtime's own
// memory (and in a Triton zone the zone's agents), as the SMF method
// leaves a quarter of the zone's cap.
const (
	memoryLimitShareNum = 3
	memoryLimitShareDen = 4
)

// memoryLimit is what applies to this process.
type memoryLimit struct {
	limit int64  // the heap's soft limit in bytes; 0: none
	cap   int64  // the memory the limit was derived from (0: not known)
	from  string // "GOMEMLIMIT", or the cgroup file that set the cap
}

// SetMemoryLimit applies the memory limit (see above) and logs it; cns
// serve calls it once, before it opens the db.
func SetMemoryLimit(log *slog.Logger) {
	m := findMemoryLimit(os.Getenv("GOMEMLIMIT"), debug.SetMemoryLimit(-1), os.DirFS("/"))
	switch {
	case m.from == "GOMEMLIMIT":
		log.Info("memory limit", "heap_limit", mib(m.limit), "from", m.from)
	case m.limit > 0:
		debug.SetMemoryLimit(m.limit)
		log.Info("memory limit", "heap_limit", mib(m.limit), "from", m.from, "cap", mib(m.cap))
	default:
		log.Info("memory limit", "heap_limit", "none", "why", "no GOMEMLIMIT and no cgroup memory limit")
	}
}

// HeapLimit returns the heap's soft limit in force (SetMemoryLimit, or
// GOMEMLIMIT), in bytes; 0 when there is none.
func HeapLimit() int64 {
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		return l
	}
	return 0
}

// findMemoryLimit decides the limit: env is GOMEMLIMIT, current the
// runtime's limit (what it made of GOMEMLIMIT), root the file system the
// cgroup files are read from.
func findMemoryLimit(env string, current int64, root fs.FS) memoryLimit {
	if env != "" {
		return memoryLimit{limit: current, from: "GOMEMLIMIT"}
	}
	limit, file, ok := cgroupMemoryLimit(root)
	if !ok {
		return memoryLimit{}
	}
	return memoryLimit{limit: limit / memoryLimitShareDen * memoryLimitShareNum, cap: limit, from: file}
}

// mib renders bytes for the log.
func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }

// cgroupMemoryLimit returns the smallest memory limit set on the
// process's cgroup or one above it, and the file that sets it; ok is
// false when there is none (no cgroups: not Linux; no limit). The
// cgroup v2 hierarchy is read when its memory controller is there, else
// cgroup v1's memory hierarchy (a hybrid host mounts it beside v2). Paths
// are as /proc/self/cgroup names them, below where the hierarchy is
// mounted (/proc/self/mountinfo), so a container's own view works too.
func cgroupMemoryLimit(root fs.FS) (limit int64, file string, ok bool) {
	groups, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return 0, "", false
	}
	mounts, err := fs.ReadFile(root, "proc/self/mountinfo")
	if err != nil {
		return 0, "", false
	}
	v2, v1 := selfCgroups(string(groups))
	for _, h := range []struct {
		group, fstype, option, file string
	}{
		{v2, "cgroup2", "", "memory.max"},
		{v1, "cgroup", "memory", "memory.limit_in_bytes"},
	} {
		if h.group == "" {
			continue
		}
		mountRoot, mountPoint, found := cgroupMount(string(mounts), h.fstype, h.option)
		if !found {
			continue
		}
		rel, below := strings.CutPrefix(h.group, mountRoot)
		if !below {
			continue // the process's cgroup is outside what is mounted here
		}
		dir := path.Join(strings.TrimPrefix(mountPoint, "/"), rel)
		if _, err := fs.Stat(root, path.Join(dir, h.file)); err != nil {
			continue // no memory controller in this hierarchy
		}
		top := path.Clean(strings.TrimPrefix(mountPoint, "/"))
		for {
			name := path.Join(dir, h.file)
			if v, set := readCgroupLimit(root, name); set && (!ok || v < limit) {
				limit, file, ok = v, "/"+name, true
			}
			if dir == top || dir == "." || dir == "/" {
				break
			}
			dir = path.Dir(dir)
		}
		return limit, file, ok
	}
	return 0, "", false
}

// selfCgroups returns the process's cgroup v2 path and its cgroup v1
// memory controller's path from /proc/self/cgroup ("" when absent).
func selfCgroups(text string) (v2, v1Memory string) {
	for line := range strings.Lines(text) {
		id, rest, _ := strings.Cut(strings.TrimSpace(line), ":")
		controllers, p, found := strings.Cut(rest, ":")
		switch {
		case !found:
		case id == "0" && controllers == "":
			v2 = p
		case containsField(controllers, ",", "memory"):
			v1Memory = p
		}
	}
	return v2, v1Memory
}

// cgroupMount finds the mount of a cgroup hierarchy of file system type
// fstype (with option among its super options, when not empty) in
// /proc/self/mountinfo: the cgroup path mounted, and where.
func cgroupMount(mountinfo, fstype, option string) (root, mountPoint string, ok bool) {
	sc := bufio.NewScanner(strings.NewReader(mountinfo))
	for sc.Scan() {
		// id parent major:minor root mount-point options [optional...] - fstype source super-options
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || len(fields) < sep+4 || fields[sep+1] != fstype {
			continue
		}
		if option != "" && !containsField(fields[sep+3], ",", option) {
			continue
		}
		return unescapeMountinfo(fields[3]), unescapeMountinfo(fields[4]), true
	}
	return "", "", false
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// containsField reports whether list, split at sep, holds field.
func containsField(list, sep, field string) bool {
	for f := range strings.SplitSeq(list, sep) {
		if f == field {
			return true
		}
	}
	return false
}

// readCgroupLimit reads one memory limit file; set is false for no limit
// ("max" in v2; v1 writes a page-rounded maximum of int64) or a file that
// cannot be read.
func readCgroupLimit(root fs.FS, name string) (limit int64, set bool) {
	b, err := fs.ReadFile(root, name)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v >= math.MaxInt64/2 {
		return 0, false
	}
	return v, true
}
