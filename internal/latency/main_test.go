package latency

import (
	"testing"

	"go.uber.org/goleak"
)

// Low starts no goroutine: none may outlive the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
