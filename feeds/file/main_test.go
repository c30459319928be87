package file

import (
	"testing"

	"go.uber.org/goleak"
)

// Nothing a test starts (an updater's Run, a feed) outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
