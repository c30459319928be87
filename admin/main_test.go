package admin

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: the API
// server's goroutines have an owner that waits for them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
