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
	l, err := busy.New(busy.DefaultConfig(), clk)
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
