package event_test

import (
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/tools/internal/sim/event"
)

// A Loop on a fake clock: a ticker that reschedules itself every 400 ms,
// and a sample at each whole second, taken after every event of that
// second.
func Example() {
	start := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	loop := event.NewLoop(clk)
	ticks := 0
	var tick func()
	tick = func() {
		ticks++
		loop.At(clk.Now().Add(400*time.Millisecond), tick)
	}
	loop.At(start, tick)
	for t := time.Second; t <= 3*time.Second; t += time.Second {
		loop.RunUntil(start.Add(t))
		fmt.Printf("at %v: %d ticks\n", clk.Now().Sub(start), ticks)
	}
	// Output:
	// at 1s: 3 ticks
	// at 2s: 6 ticks
	// at 3s: 8 ticks
}
