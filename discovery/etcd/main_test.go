package etcd_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine outlives them: each test closes
// its etcd clients, and every resolver and registration, before it ends,
// so none of etcd's or gRPC's goroutines needs ignoring.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
