package ratesim_test

import (
	"fmt"
	"log"

	"github.com/sluice-rpc/sluice/pacing"
	"github.com/sluice-rpc/sluice/tools/internal/sim/ratesim"
)

// Heroku's two runs for its winning pacer, in virtual time.
func Example() {
	cfg := pacing.Config{Strategy: pacing.StrategyProportionalRemainingDecrease}
	steady := ratesim.Steady()
	r, err := ratesim.Run(steady, cfg, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("30 minutes, 10 clients: %d requests, retry rate %.2f%%, max sleep %.1fs\n",
		r.Requests(), 100*r.RetryRate(), r.MaxSleep().Seconds())

	clear := ratesim.Clear()
	c, err := ratesim.Run(clear, cfg, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("4500 requests cleared in %.0fs\n", c.End.Seconds())
	// Output:
	// 30 minutes, 10 clients: 2304 requests, retry rate 3.73%, max sleep 17.3s
	// 4500 requests cleared in 75s
}
