package stats_test

import (
	"slices"
	"testing"
	"time"

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
	if last != retry.MaxAttemptsCap {
		t.Errorf("AttemptBuckets ends at %v, want retry.MaxAttemptsCap %d", last, retry.MaxAttemptsCap)
	}
	for i, b := range stats.AttemptBuckets {
		if b != float64(i) {
			t.Errorf("AttemptBuckets[%d] = %v, want %d: one bucket per count from 0", i, b, i)
		}
	}
}

// TestBucketBounds: the 1-2-5 bounds, 16 of them from 100µs to 10s, and 16
// from 10µs to 1s for the Doorman server.
func TestBucketBounds(t *testing.T) {
	want := []time.Duration{100 * time.Microsecond, 200 * time.Microsecond, 500 * time.Microsecond,
		time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
		50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second}
	if !slices.Equal(stats.LatencyBuckets, want) {
		t.Errorf("LatencyBuckets = %v, want %v", stats.LatencyBuckets, want)
	}
	if b := stats.LeaseServerLatencyBuckets; len(b) != 16 || b[0] != 10*time.Microsecond || b[15] != time.Second {
		t.Errorf("LeaseServerLatencyBuckets = %v, want 16 bounds from 10µs to 1s", b)
	}
}
