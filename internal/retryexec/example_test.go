package retryexec_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/retry"
)

// A call that fails twice with BUSY and then succeeds; the second failure
// carries a pushback hint in its TChannel error message.
func ExampleExecutor() {
	policy := retry.Policy{
		MaxAttempts:       4,
		InitialBackoff:    time.Millisecond,
		MaxBackoff:        10 * time.Millisecond,
		BackoffMultiplier: 2,
		RetryableCodes:    codes.NewSet(codes.Busy),
	}
	throttle, err := retryexec.NewThrottle(retry.ThrottleConfig{MaxTokens: 10, TokenRatio: 0.1})
	if err != nil {
		log.Fatal(err)
	}
	exec, err := retryexec.NewExecutor(retryexec.ExecutorConfig{Policy: &policy, Throttle: throttle})
	if err != nil {
		log.Fatal(err)
	}

	messages := []string{"server busy", "server busy retry-pushback-ms=2"}
	res := exec.Do(context.Background(), func(ctx context.Context, a retryexec.Attempt) retryexec.Outcome {
		fmt.Println("attempt, previous-rpc-attempts =", a.Number)
		if a.Number < len(messages) {
			p, msg := retryexec.PushbackFromMessage(messages[a.Number])
			return retryexec.Outcome{Err: errors.New(msg), Code: codes.Busy, Pushback: p}
		}
		return retryexec.Outcome{}
	})
	fmt.Println(res.Stop, "after", res.Attempts, "attempts; tokens left:", throttle.Tokens())
	// Output:
	// attempt, previous-rpc-attempts = 0
	// attempt, previous-rpc-attempts = 1
	// attempt, previous-rpc-attempts = 2
	// succeeded after 3 attempts; tokens left: 8.1
}

func ExampleThrottle() {
	t, _ := retryexec.NewThrottle(retry.ThrottleConfig{MaxTokens: 4, TokenRatio: 0.5})
	for range 2 {
		t.RecordFailure()
	}
	fmt.Println(t.Tokens(), t.Allow()) // at the threshold: no retries
	t.RecordSuccess()
	fmt.Println(t.Tokens(), t.Allow())
	// Output:
	// 2 false
	// 2.5 true
}

func ExampleParsePushback() {
	for _, v := range []string{"250", "-1", "soon"} {
		fmt.Println(retryexec.ParsePushback(v))
	}
	fmt.Println(retryexec.AppendPushback("server busy", retry.PushbackAfter(300*time.Millisecond)))
	// Output:
	// delay 250ms
	// stop
	// stop
	// server busy retry-pushback-ms=300
}

// A call holds its request's bytes in the channel's retry buffer while it
// may still retry; one that does not fit is sent once, without retries.
func ExampleBuffer() {
	buf := retryexec.NewBuffer(retryexec.BufferConfig{Total: 1 << 20, PerCall: 256 << 10}) // 1 MiB in all, 256 KiB per call
	small, ok := buf.Reserve(200 << 10)
	fmt.Println("200 KiB call retryable:", ok, "- held:", buf.Used())
	_, ok = buf.Reserve(300 << 10)
	fmt.Println("300 KiB call retryable:", ok)
	small.Release() // the call returned to the application
	fmt.Println("held:", buf.Used())
	// Output:
	// 200 KiB call retryable: true - held: 204800
	// 300 KiB call retryable: false
	// held: 0
}
