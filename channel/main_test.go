package channel

import (
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	slowtest.DefaultParallel(8)
	goleak.VerifyTestMain(m)
}
