package cli

import (
	"io"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/clitest"
)

// TestMain runs the tests under goleak.
func TestMain(m *testing.M) {
	// The parallel tests here wait on real time (runs of a fixed length,
	// servers' graces).
	slowtest.DefaultParallel(4)
	goleak.VerifyTestMain(m)
}

// syncBuffer is clitest.SyncBuffer, by the name the tests here use.
type syncBuffer = clitest.SyncBuffer

// run is Run of sluice.
func run(args []string, stdout, stderr io.Writer) int { return Run(args, stdout, stderr, nil) }
