package testload

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Calls and failures are counted, the first failure kept, and Stop leaves
// no goroutine.
func TestLoopCounts(t *testing.T) {
	var n atomic.Int64
	boom := errors.New("boom")
	l := Start(3, func() error {
		if n.Add(1)%2 == 0 {
			return boom
		}
		return nil
	})
	testwait.Until(t, "100 calls", func() bool { return l.Calls() >= 100 })
	l.Stop()
	l.Stop()
	if l.Calls() != n.Load() || l.Failed() != n.Load()/2 || !errors.Is(l.FirstErr(), boom) {
		t.Fatalf("calls %d (made %d), failed %d, first %v", l.Calls(), n.Load(), l.Failed(), l.FirstErr())
	}
}
