package clock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/clock"
)

// A fake clock moves only when told to, and fires the timers that fall due,
// in order of their deadlines.
func ExampleFake() {
	clk := clock.NewFake(time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC))
	start := clk.Now()
	slow := clk.NewTimer(2 * time.Second)
	fast := clk.NewTimerAt(start.Add(time.Second))
	fmt.Println("pending:", clk.Timers())

	clk.Add(1500 * time.Millisecond)
	at := <-fast.C()
	fmt.Println("fast fired at", at.Sub(start), "- pending:", clk.Timers())
	select {
	case <-slow.C():
		fmt.Println("slow fired early")
	default:
		fmt.Println("slow still waits; elapsed", clk.Since(start))
	}
	fmt.Println("stopped:", slow.Stop(), "- pending:", clk.Timers())
	// Output:
	// pending: 2
	// fast fired at 1.5s - pending: 1
	// slow still waits; elapsed 1.5s
	// stopped: true - pending: 0
}

// Sleep on a fake clock returns once another goroutine has moved the clock
// past the wait. Timers tells the mover when the sleeper has started
// waiting, so nothing depends on the scheduler.
func ExampleSleep() {
	clk := clock.NewFake(time.Unix(0, 0))
	done := make(chan error)
	go func() { done <- clock.Sleep(context.Background(), clk, time.Minute) }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.WaitTimers(ctx, 1); err != nil { // the sleeper is waiting
		fmt.Println("the sleeper never started waiting:", err)
		return
	}
	clk.Add(time.Minute)
	fmt.Println("slept:", <-done, "- now", clk.Now().UTC().Format(time.TimeOnly))
	// Output:
	// slept: <nil> - now 00:01:00
}
