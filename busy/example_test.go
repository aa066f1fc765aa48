package busy_test

import (
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/clock"
)

// One busy second at 5000 requests collapses the limit to 38; quiet seconds
// recover it x4 each.
func Example() {
	clk := clock.NewFake(time.Unix(0, 0))
	l, err := busy.New(busy.Config{Clock: clk}) // the zero Config: the design's defaults
	if err != nil {
		panic(err)
	}
	for i := 0; i < 5000; i++ {
		if l.Allow() && i < 3000 {
			l.RecordBusy() // the peer answered busy
		}
	}
	for sec := 1; sec <= 4; sec++ {
		clk.Add(time.Second)
		fmt.Printf("second %d: limit %.2f\n", sec, l.Limit())
	}
	// Output:
	// second 1: limit 38.15
	// second 2: limit 152.59
	// second 3: limit 610.35
	// second 4: limit 2441.41
}

// AllowAt takes the time as an argument: a caller that has just read the
// clock (or a simulator in virtual time) passes it in. A limit of 3 allows
// three requests per one-second window; the fourth waits for the next.
func ExampleLimiter_AllowAt() {
	start := time.Unix(0, 0)
	l, err := busy.New(busy.Config{Ceiling: 3, Clock: clock.NewFake(start)})
	if err != nil {
		panic(err)
	}
	now := start.Add(100 * time.Millisecond)
	for i := 1; i <= 4; i++ {
		fmt.Printf("request %d allowed: %v\n", i, l.AllowAt(now))
	}
	fmt.Println("next window:", l.AllowAt(start.Add(time.Second)))
	// Output:
	// request 1 allowed: true
	// request 2 allowed: true
	// request 3 allowed: true
	// request 4 allowed: false
	// next window: true
}

// Next is the whole algorithm: the limit of the next window from the limit
// in force and the busy answers counted.
func ExampleConfig_Next() {
	var cfg busy.Config // the zero Config: the design's defaults

	fmt.Println(cfg.Next(1000, 0))  // a quiet window: x4, up to the ceiling
	fmt.Println(cfg.Next(1000, 1))  // one busy answer: x4, halved once
	fmt.Println(cfg.Next(1000, 10)) // ten: x4 / 2^10
	cfg.Strategy = busy.Constant
	fmt.Println(cfg.Next(1000, 1)) // (1000 + 200) / 2
	// Output:
	// 4000
	// 2000
	// 3.90625
	// 600
}
