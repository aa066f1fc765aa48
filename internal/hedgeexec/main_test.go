package hedgeexec

import (
	"testing"

	"go.uber.org/goleak"
)

// Every hedged attempt runs on its own goroutine: none may outlive its call.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
