package cli

import (
	"bytes"
	"io"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
)

// TestMain runs the tests under goleak.
func TestMain(m *testing.M) {
	// The parallel tests here wait on real time (runs of a fixed length,
	// servers' graces).
	slowtest.DefaultParallel(4)
	goleak.VerifyTestMain(m)
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// run is Run of sluice.
func run(args []string, stdout, stderr io.Writer) int { return Run(args, stdout, stderr, nil) }
