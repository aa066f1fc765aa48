package deploy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain serves as a fleet server when Run re-executes this test binary
// (ServeChildIfAsked), and otherwise runs the tests with goleak watching
// for goroutines left behind.
func TestMain(m *testing.M) {
	ServeChildIfAsked()
	goleak.VerifyTestMain(m)
}
