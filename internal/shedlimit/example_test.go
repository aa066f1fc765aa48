package shedlimit_test

import (
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/shedlimit"
	"github.com/sluice-rpc/sluice/shed"
)

// A Limiter in front of a handler: admit, run, release; refuse with the
// pushback. Here on a fake clock, requests taking 2 ms one at a time.
func Example() {
	clk := clock.NewFake(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC))
	lim, err := shedlimit.New(shed.Config{Clock: clk}) // the zero Config: the defaults
	if err != nil {
		panic(err)
	}
	fmt.Println("limit while probing:", lim.Limit())
	for i := 0; i < 25; i++ { // the probe: 25 requests of 2 ms
		tok, ok := lim.Acquire()
		if !ok {
			fmt.Println("refused; retry after", lim.Pushback())
			return
		}
		clk.Add(2 * time.Millisecond)
		lim.Release(tok)
	}
	s := lim.State()
	fmt.Println("no-load latency:", s.NoLoadLatency)
	fmt.Println("limit after the probe:", s.Limit)
	// Output:
	// limit while probing: 3
	// no-load latency: 2ms
	// limit after the probe: 20
}

// With the limit taken, a request is refused and told when to come back.
func ExampleLimiter_Pushback() {
	lim, _ := shedlimit.New(shed.Config{MinLimit: 1, MaxLimit: 1}) // a fixed limit of 1
	tok, _ := lim.Acquire()
	if _, ok := lim.Acquire(); !ok {
		fmt.Println("busy; retry after", lim.Pushback())
	}
	lim.Release(tok)
	// Output:
	// busy; retry after 1ms
}
