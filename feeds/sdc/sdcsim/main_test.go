package sdcsim

import (
	"testing"

	"go.uber.org/goleak"
)

// Every simulator a test starts is closed with everything it ran.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
