package etcdelection_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests with goleak watching for goroutines left behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
