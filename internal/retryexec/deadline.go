package retryexec

import (
	"context"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/latency"
)

// Doomed reports whether an attempt after the first would be sent with
// less time before ctx's deadline than the method's expected latency est
// (latency.Low: a low quantile of what its attempts have taken), so that
// it could not finish in time: such a retry or hedge is not sent
// (retry.StopDeadline). It is false without an estimate (est nil, or its
// cold start: fewer than latency.MinSamples observations) and for a
// context without a deadline; the clock is read only when there is an
// estimate to compare. Both executors decide with it.
func Doomed(ctx context.Context, est *latency.Low, clk clock.Clock) bool {
	if est == nil || !est.Ready() {
		return false
	}
	dl, ok := ctx.Deadline()
	return ok && est.Doomed(dl.Sub(clk.Now()))
}
