package pacing_test

import (
	"fmt"
	"log"
	"maps"
	"slices"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/pacing"
)

// A server announces a quota of 2 requests per second: each answer carries
// the quota's headers, and the request past the quota is refused with the
// window's time left, which a rate-limited handler gives as pushback
// (channel.BusyAfter(sig.TimeLeft, ...)). A client with
// channel.WithPacing reads these headers and paces itself.
func Example() {
	clk := clock.NewFake(time.Date(2021, 11, 25, 10, 0, 0, 0, time.UTC))
	quota, err := pacing.NewQuota(pacing.QuotaConfig{Limit: 2, Window: time.Second, Dimension: pacing.DimensionUser, Clock: clk})
	if err != nil {
		log.Fatal(err)
	}
	clk.Add(400 * time.Millisecond)
	for range 3 {
		sig, ok := quota.Take()
		h := map[string]string{}
		pacing.SetHeaders(h, sig)
		for _, k := range slices.Sorted(maps.Keys(h)) {
			fmt.Printf("%s: %s; ", k, h[k])
		}
		fmt.Println("served:", ok)
	}
	// Output:
	// RateLimit-Limit: 2;w=1; RateLimit-Remaining: 1; RateLimit-Reset: 1; X-RateLimit-User: Remain:1,Limit:2,Time:1000,TimeLeft:600; served: true
	// RateLimit-Limit: 2;w=1; RateLimit-Remaining: 0; RateLimit-Reset: 1; X-RateLimit-User: Remain:0,Limit:2,Time:1000,TimeLeft:600; served: true
	// RateLimit-Limit: 2;w=1; RateLimit-Remaining: 0; RateLimit-Reset: 1; X-RateLimit-User: Remain:0,Limit:2,Time:1000,TimeLeft:600; served: false
}

// A client's pacer is configured by a Config (channel.PacingConfig's
// Pacer); Validate names the field and the rule a value breaks.
func ExampleConfig() {
	c := pacing.Config{Strategy: pacing.StrategyReserve, Limit: 100, Window: time.Minute}
	fmt.Println(c.Validate(), c.MinSleep())
	c.Strategy = "fast"
	fmt.Println(c.Validate())
	// Output:
	// <nil> 600ms
	// pacing: Config.Strategy is "fast", must be one of the names Strategies lists
}
