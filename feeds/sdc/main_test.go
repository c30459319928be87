package sdc_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No client, feed or simulator a test starts outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
