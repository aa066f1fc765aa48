package hedgeexec_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/hedge"
	"github.com/sluice-rpc/sluice/internal/hedgeexec"
	"github.com/sluice-rpc/sluice/internal/retryexec"
)

// A hedged call whose original attempt fails at once with a non-fatal
// code: the first hedge goes out immediately instead of after the delay.
func ExampleExecutor() {
	exec, err := hedgeexec.NewExecutor(hedgeexec.ExecutorConfig{Policy: hedge.Policy{
		MaxAttempts:   3,
		HedgingDelay:  time.Hour,
		NonFatalCodes: codes.NewSet(codes.Busy),
	}})
	if err != nil {
		log.Fatal(err)
	}
	res := exec.Do(context.Background(), func(ctx context.Context, a retryexec.Attempt) retryexec.Outcome {
		if a.Number == 0 {
			return retryexec.Outcome{Err: errors.New("busy"), Code: codes.Busy}
		}
		return retryexec.Outcome{}
	})
	fmt.Println(res.Stop, "by attempt", res.Winner, "of", res.Sent)
	// Output:
	// succeeded by attempt 1 of 2
}

// The hedging delay on a fake clock: the original attempt hangs, the clock
// passes the delay, the hedge goes out and wins, and the original attempt
// is cancelled. Do returns only after both attempts have returned.
func ExampleExecutor_delay() {
	clk := clock.NewFake(time.Unix(0, 0))
	exec, err := hedgeexec.NewExecutor(hedgeexec.ExecutorConfig{Clock: clk, Policy: hedge.Policy{
		MaxAttempts:   2,
		HedgingDelay:  50 * time.Millisecond,
		NonFatalCodes: codes.NewSet(codes.Busy),
	}})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		// Move the clock once the executor waits for the delay.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if clk.WaitTimers(ctx, 1) == nil {
			clk.Add(50 * time.Millisecond)
		}
	}()
	cancelled := make(chan bool, 1)
	res := exec.Do(context.Background(), func(ctx context.Context, a retryexec.Attempt) retryexec.Outcome {
		if a.Number == 0 { // a slow peer: answers only when cancelled
			<-ctx.Done()
			cancelled <- true
			return retryexec.Outcome{Err: ctx.Err(), Code: codes.Cancelled}
		}
		return retryexec.Outcome{}
	})
	fmt.Println(res.Stop, "by attempt", res.Winner, "of", res.Sent, "- original cancelled:", <-cancelled)
	// Output:
	// succeeded by attempt 1 of 2 - original cancelled: true
}

// An adaptive delay follows the method's recent latency: here the 90th
// percentile of the last 10 first attempts, within [Floor, Cap]. A first
// attempt cut off before it finished counts as lasting longer.
func ExampleEstimator() {
	e, err := hedgeexec.NewEstimator(hedge.Adaptive{Quantile: 0.9, Window: 10,
		Floor: time.Millisecond, Cap: time.Second}, 100*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("before any latency:", e.Delay())
	for i := 1; i <= 10; i++ {
		e.Observe(time.Duration(i) * 10 * time.Millisecond) // 10ms ... 100ms
	}
	fmt.Println("after 10ms..100ms:", e.Delay())
	for range 10 {
		e.Observe(5 * time.Second) // the service slows down
	}
	fmt.Println("after a slow spell:", e.Delay())
	for range 7 {
		e.Observe(20 * time.Millisecond)
	}
	// Two first attempts are cancelled after 25ms because their hedges
	// won: they would have taken longer. The one slow attempt that
	// finished says how much longer, and 3 of 10 outlasting 20ms puts
	// the 90th percentile there.
	e.ObserveCensored(25 * time.Millisecond)
	e.ObserveCensored(25 * time.Millisecond)
	e.Observe(300 * time.Millisecond)
	fmt.Println("after 7 at 20ms, 2 cut off at 25ms, 1 at 300ms:", e.Delay())
	// Output:
	// before any latency: 100ms
	// after 10ms..100ms: 90ms
	// after a slow spell: 1s
	// after 7 at 20ms, 2 cut off at 25ms, 1 at 300ms: 300ms
}
