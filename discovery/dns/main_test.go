package dns_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Resolve starts goroutines (the lookups of SRV targets, Go's resolver's
// own): none may outlive it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
