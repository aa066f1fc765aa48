package stats_test

import (
	"testing"

	"github.com/sluice-rpc/sluice/hedge"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/stats"
)

// AttemptBuckets ends at the default cap on attempts, so that a bucket of
// its own holds every count a Channel with default options can send.
func TestAttemptBucketsEndAtTheCap(t *testing.T) {
	last := stats.AttemptBuckets[len(stats.AttemptBuckets)-1]
	if last != retry.MaxAttemptsCap {
		t.Errorf("AttemptBuckets ends at %v, want retry.MaxAttemptsCap %d", last, retry.MaxAttemptsCap)
	}
	if last != hedge.MaxAttemptsCap {
		t.Errorf("AttemptBuckets ends at %v, want hedge.MaxAttemptsCap %d", last, hedge.MaxAttemptsCap)
	}
	for i, b := range stats.AttemptBuckets {
		if b != float64(i) {
			t.Errorf("AttemptBuckets[%d] = %v, want %d: one bucket per count from 0", i, b, i)
		}
	}
}
