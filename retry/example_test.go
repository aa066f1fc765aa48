package retry_test

import (
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/retry"
)

// gRFC A6's retry example in code: up to four attempts on BUSY or
// DECLINED, the waits drawn below ceilings that double from 100ms up to
// 1s (equal jitter here: never less than half the ceiling). A service
// usually writes it in its service config (package serviceconfig) and a
// Channel runs it.
func Example() {
	p := retry.Policy{
		MaxAttempts:       4,
		InitialBackoff:    100 * time.Millisecond,
		MaxBackoff:        time.Second,
		BackoffMultiplier: 2,
		RetryableCodes:    codes.NewSet(codes.Busy, codes.Declined),
		Jitter:            backoff.EqualJitter,
	}
	if err := p.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	b := p.Backoff()
	for n := 1; n < p.Attempts(0); n++ {
		fmt.Printf("retry %d: waits %v to %v\n", n, b.Delay(n, 0), b.Ceiling(n))
	}
	fmt.Println("retries BUSY:", p.RetryableCodes.Has(codes.Busy), "- TIMEOUT:", p.RetryableCodes.Has(codes.Timeout))
	// Output:
	// retry 1: waits 50ms to 100ms
	// retry 2: waits 100ms to 200ms
	// retry 3: waits 200ms to 400ms
	// retries BUSY: true - TIMEOUT: false
}

func ExamplePolicy_Validate() {
	p := retry.Policy{MaxAttempts: 1, InitialBackoff: time.Second, MaxBackoff: time.Second,
		BackoffMultiplier: 2, RetryableCodes: codes.NewSet(codes.Busy)}
	fmt.Println(p.Validate())
	p.MaxAttempts = 10
	fmt.Println(p.Validate(), p.Attempts(0))
	// Output:
	// retry: Policy.MaxAttempts is 1, must be >= 2
	// <nil> 5
}

// A handler that asks its callers to wait before retrying sets the
// retry-pushback-ms header to FormatPushback's value (a Thrift handler
// calls thrift.SetPushback, which does).
func ExampleFormatPushback() {
	for _, p := range []retry.Pushback{retry.PushbackAfter(250 * time.Millisecond), retry.PushbackStopped(), {}} {
		fmt.Printf("%v: %s=%q\n", p, retry.PushbackHeader, retry.FormatPushback(p))
	}
	// Output:
	// delay 250ms: retry-pushback-ms="250"
	// stop: retry-pushback-ms="-1"
	// none: retry-pushback-ms=""
}
