//go:build linux

package db

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tritondatacenter/cns/db/powercut"
)

// Power cuts under the store, on db/powercut: a file system that keeps
// only what was fsynced (a file's bytes) and what its directory's fsync
// made durable (a name). The store's life (powerLife) is run once to
// list its file system operations, then again and again with the power
// cut before one of them: before every fsync, directory fsync, rename,
// create and unlink, and before a sample of the writes. After each cut
// the file must open, pass Check, and hold exactly what the last step
// that returned left (a commit, a live compaction, a backup, an offline
// compaction, a restore): never less, never a torn mix.
func TestPowerCut(t *testing.T) {
	// The dry run: every step returns; its operations are the cut points.
	d := powercut.NewDisk(t)
	var ops []powercut.Op
	d.FS.CutBefore(func(op powercut.Op) bool { ops = append(ops, op); return false })
	steps, err := runPowerLife(t, d)
	if err != nil {
		t.Fatalf("the life without a cut: %v", err)
	}
	d.Unmount()
	points := cutPoints(ops, os.Getenv("CNS_LONG") != "")
	slices.Sort(points)
	points = slices.Compact(points)
	t.Logf("the life: %d steps, %d operations; cutting before %d of them", len(steps), len(ops), len(points))

	kinds := map[powercut.OpKind]int{}
	landed := map[string]int{} // the last step that returned before each cut
	for _, n := range points {
		d := powercut.NewDisk(t)
		d.FS.CutBefore(func(op powercut.Op) bool { return op.N == n })
		steps, err := runPowerLife(t, d)
		op, lost, cut := d.FS.CutAt()
		if !cut {
			t.Fatalf("cut %d: no cut; the life returned %v", n, err)
		}
		if err == nil {
			t.Fatalf("cut before %v: the life went on without a file system", op)
		}
		kinds[op.Kind]++
		d.Unmount()
		last := powerStep{name: "nothing"}
		if len(steps) > 0 {
			last = steps[len(steps)-1]
		}
		landed[last.name]++
		checkAfterCut(t, filepath.Join(d.Dir, "cns.db"), op, lost, last)
	}
	t.Logf("%d cuts, before: %v; the last step that returned: %v", len(points), kinds, landed)
}

// cutPoints picks the operations to cut before: in the long run
// (CNS_LONG=1, RELIABILITY.md) every one; otherwise every one but the
// writes, and a sample of those (two writes between the same syncs
// differ only in what is in memory, which a cut drops alike).
func cutPoints(ops []powercut.Op, all bool) []int {
	var points, writes []int
	for _, op := range ops {
		switch {
		case all:
			points = append(points, op.N)
		case op.Kind == powercut.OpWrite:
			writes = append(writes, op.N)
		default:
			points = append(points, op.N)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range min(len(writes), 10) {
		points = append(points, writes[rng.IntN(len(writes))])
	}
	slices.Sort(points)
	return slices.Compact(points)
}

// powerStep is a step of the life that returned, the digest of what the
// file held then and its size.
type powerStep struct {
	name, digest string
	size         int64
}

// runPowerLife runs powerLife on the disk in a process of its own and
// returns the steps that returned.
func runPowerLife(t *testing.T, d *powercut.Disk) ([]powerStep, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), powerLifeEnv+"="+d.Mnt)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var steps []powerStep
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 3)
		if len(f) != 3 {
			t.Fatalf("the life printed %q", sc.Text())
		}
		size, _ := strconv.ParseInt(f[1], 10, 64)
		steps = append(steps, powerStep{name: f[2], digest: f[0], size: size})
	}
	if err != nil {
		return steps, &lifeError{err, stderr.String()}
	}
	return steps, nil
}

type lifeError struct {
	err    error
	stderr string
}

func (e *lifeError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.stderr) }

// checkAfterCut opens the file the cut left (an ordinary file now: the
// disk is unmounted) and compares it with what the last step that
// returned left.
func checkAfterCut(t *testing.T, path string, op powercut.Op, lost powercut.Lost, last powerStep) {
	t.Helper()
	_, statErr := os.Stat(path)
	if last.digest == "" {
		// Nothing returned: no file, or one that opens.
		if statErr == nil {
			st, err := Open(path, Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("cut before %v (nothing committed): the file left does not open: %v", op, err)
			}
			st.Close()
		}
		return
	}
	if statErr != nil {
		t.Fatalf("cut before %v, after %q returned (lost %+v): the db file is gone: %v", op, last.name, lost, statErr)
	}
	st, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("cut before %v, after %q returned: open: %v", op, last.name, err)
	}
	defer st.Close()
	probs, err := st.Check()
	if err != nil || len(probs) > 0 {
		t.Fatalf("cut before %v, after %q returned: check: %v %v", op, last.name, err, probs)
	}
	got, err := contentsDigest(st)
	if err != nil {
		t.Fatal(err)
	}
	if got != last.digest {
		t.Fatalf("cut before %v (lost %+v): the file is not what %q left", op, lost, last.name)
	}
	// The same records, and for a compaction the smaller file: the
	// next step (a restore) does not touch it until its rename.
	if fi, err := os.Stat(path); err == nil && last.name == "offline compaction" && fi.Size() != last.size {
		t.Fatalf("cut before %v: the file is %d bytes, the compaction had left %d", op, fi.Size(), last.size)
	}
}
