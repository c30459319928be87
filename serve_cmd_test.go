package main

import (
	"runtime"
	"testing"
)

// On one CPU cns still runs two Ps, so that a commit does not hold the
// answers back; more are left alone, and so is a GOMAXPROCS the operator
// set.
func TestAtLeastTwoProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct {
		env       string
		before    int
		wantAfter int
	}{
		{"", 1, 2},
		{"", 2, 2},
		{"", 3, 3},
		{"1", 1, 1},
	} {
		t.Setenv("GOMAXPROCS", tc.env)
		runtime.GOMAXPROCS(tc.before)
		atLeastTwoProcs()
		if got := runtime.GOMAXPROCS(0); got != tc.wantAfter {
			t.Errorf("GOMAXPROCS=%q, %d Ps before: %d after, want %d", tc.env, tc.before, got, tc.wantAfter)
		}
	}
}
