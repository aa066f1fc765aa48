package hedge_test

import (
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/hedge"
)

// gRFC A6's hedging example: up to four attempts, 500ms apart; the service
// config may ask for more, but the client caps them at five.
func ExamplePolicy() {
	p := hedge.Policy{
		MaxAttempts:   4,
		HedgingDelay:  500 * time.Millisecond,
		NonFatalCodes: codes.NewSet(codes.Busy, codes.Declined, codes.Unexpected),
	}
	fmt.Println(p.Validate(), p.Attempts(0))
	p.MaxAttempts = 10
	fmt.Println(p.Validate(), p.Attempts(0))
	p.MaxAttempts = 1
	fmt.Println(p.Validate())
	// Output:
	// <nil> 4
	// <nil> 5
	// hedge: Policy.MaxAttempts is 1, must be >= 2
}

// An adaptive delay: hedge the calls whose first attempt outlasts the 95th
// percentile of the last 1,000 first attempts, kept within [5ms, 500ms],
// and send at most 5% more requests. HedgingDelay applies until 100
// latencies are seen.
func ExampleAdaptive() {
	p := hedge.Policy{
		MaxAttempts:   2,
		HedgingDelay:  50 * time.Millisecond,
		NonFatalCodes: codes.NewSet(codes.Busy),
		Adaptive: &hedge.Adaptive{Quantile: 0.95, Window: 1000, Floor: 5 * time.Millisecond,
			Cap: 500 * time.Millisecond, Budget: 0.05},
	}
	fmt.Println(p.Validate())
	p.Adaptive.Window = 5
	fmt.Println(p.Validate())
	// Output:
	// <nil>
	// hedge: Policy.Adaptive.Window is 5, must be in [10, 1000000]
}
