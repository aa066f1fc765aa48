package backoff_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
)

// A retry loop waits Delay(n, r) after its nth failure, with r drawn from
// its own random source (seeded here so that the output is fixed).
func Example() {
	b := backoff.Exponential{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2,
		Jitter: backoff.EqualJitter}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 5; n++ {
		d := b.Delay(n, rng.Float64())
		fmt.Printf("retry %d: ceiling %v, wait in [%v, %v): %v\n", n, b.Ceiling(n), b.Ceiling(n)/2, b.Ceiling(n), d >= b.Ceiling(n)/2 && d < b.Ceiling(n))
	}
	// Output:
	// retry 1: ceiling 100ms, wait in [50ms, 100ms): true
	// retry 2: ceiling 200ms, wait in [100ms, 200ms): true
	// retry 3: ceiling 400ms, wait in [200ms, 400ms): true
	// retry 4: ceiling 800ms, wait in [400ms, 800ms): true
	// retry 5: ceiling 1s, wait in [500ms, 1s): true
}

func ExampleExponential_Delay() {
	b := backoff.Exponential{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2}
	for n := 1; n <= 5; n++ {
		fmt.Print(b.Delay(n, 0.5), " ")
	}
	fmt.Println("(full jitter, r = 0.5)")
	b.Jitter = backoff.EqualJitter
	for n := 1; n <= 5; n++ {
		fmt.Print(b.Delay(n, 0.5), " ")
	}
	fmt.Println("(equal jitter, r = 0.5)")
	b.Jitter, b.Spread = backoff.ProportionalJitter, 0.2
	for _, r := range []float64{0, 0.5, 0.999} {
		fmt.Print(b.Delay(1, r).Round(time.Millisecond), " ")
	}
	fmt.Println("(proportional jitter, spread 0.2, first retry)")
	// Output:
	// 50ms 100ms 200ms 400ms 500ms (full jitter, r = 0.5)
	// 75ms 150ms 300ms 600ms 750ms (equal jitter, r = 0.5)
	// 80ms 100ms 120ms (proportional jitter, spread 0.2, first retry)
}
