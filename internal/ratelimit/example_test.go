package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/ratelimit"
	"github.com/sluice-rpc/sluice/pacing"
)

// A client paced by Heroku's winning strategy reads the quota headers of
// each response, and remembers the server's throttling window so that new
// calls fail fast instead of waiting longer than they may.
func Example() {
	clk := clock.NewFake(time.Date(2021, 11, 25, 10, 0, 0, 0, time.UTC))
	pacer, err := ratelimit.New(pacing.Config{
		Strategy: pacing.StrategyProportionalRemainingDecrease,
		Rand:     func() float64 { return 0 }, // no jitter, for a stable output
	})
	if err != nil {
		log.Fatal(err)
	}
	windows := ratelimit.NewWindows(clk)
	backoff := backoff.Exponential{Initial: 100 * time.Millisecond, Max: 2 * time.Second, Multiplier: 2}
	const maxDelay = 5 * time.Second

	// A response the server refused: the "API + User" quota is spent for
	// another 12 s.
	sig, err := ratelimit.ParseHeaders(map[string]string{
		pacing.HeaderUserAPI: "Remain:0,Limit:100,Time:60000,TimeLeft:12000,Reset:1637834412000",
	}, clk.Now())
	if err != nil {
		log.Fatal(err) // in a client: count it and carry on
	}
	fmt.Println("dimension:", sig.Dimension, "throttled:", ratelimit.Throttled(sig), "wait:", ratelimit.Wait(sig))

	windows.RecordSignal("kv", "Get", sig)
	fmt.Println("pacer sleep before the retry:", pacer.OnRateLimited(clk.Now(), sig))
	wait, tooLong := ratelimit.Delay(backoff, 1, 0.5, ratelimit.Wait(sig), maxDelay)
	fmt.Println("throttle-aware backoff:", wait, "too long:", tooLong)

	// A new call to the same method fails fast: the window outlasts its
	// maximum delay.
	err = windows.Wait(context.Background(), ratelimit.MethodKey("kv", "Get"), maxDelay)
	fmt.Println(errors.Is(err, pacing.ErrRateLimited), err)

	// Once the window has passed, calls go through; a success with half
	// the quota left halves the pacer's sleep.
	clk.Add(12 * time.Second)
	fmt.Println(windows.Wait(context.Background(), ratelimit.MethodKey("kv", "Get"), maxDelay))
	pacer.OnSuccess(clk.Now(), pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldLimit, Remaining: 50, Limit: 100})
	fmt.Println("pacer sleep before the next call:", pacer.Before(clk.Now()))
	// Output:
	// dimension: user-api throttled: true wait: 12s
	// pacer sleep before the retry: 960ms
	// throttle-aware backoff: 12s too long: true
	// true pacing: kv::Get is throttled by the server for another 12s, longer than the maximum delay (5s); retry after the window ends
	// <nil>
	// pacer sleep before the next call: 480ms
}
