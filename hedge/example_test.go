package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/hedge"
	"github.com/sluice-rpc/sluice/retry"
)

// The seed's example: up to four attempts, 500ms apart; the service config
// may ask for more, but the client caps them at five.
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
	// hedge: maxAttempts is 1, must be >= 2
}

// A hedged call whose original attempt fails at once with a non-fatal
// code: the first hedge goes out immediately instead of after the delay.
func ExampleExecutor() {
	exec, err := hedge.NewExecutor(hedge.ExecutorConfig{Policy: hedge.Policy{
		MaxAttempts:   3,
		HedgingDelay:  time.Hour,
		NonFatalCodes: codes.NewSet(codes.Busy),
	}})
	if err != nil {
		log.Fatal(err)
	}
	res := exec.Do(context.Background(), func(ctx context.Context, a retry.Attempt) retry.Outcome {
		if a.Number == 0 {
			return retry.Outcome{Err: errors.New("busy"), Code: codes.Busy}
		}
		return retry.Outcome{}
	})
	fmt.Println(res.Stop, "by attempt", res.Winner, "of", res.Sent)
	// Output:
	// succeeded by attempt 1 of 2
}
