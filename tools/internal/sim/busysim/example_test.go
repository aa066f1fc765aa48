package busysim_test

import (
	"fmt"
	"io"
	"log"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/tools/internal/sim/busysim"
)

// The steady scenario of TChannel's "Throttling on Busy Responses" design
// (5000 requests and 3000 busy answers a second until second 9) with both
// recovery strategies: the default recovers, the constant one does not
// within the 30 simulated seconds.
func Example() {
	s := busysim.Presets["steady"]
	var cfg busy.Config // the design's defaults
	for _, strategy := range []busy.Strategy{busy.Multiplicative, busy.Constant} {
		cfg.Strategy = strategy
		r, err := busysim.Run(io.Discard, cfg, s) // io.Discard: skip the printed table
		if err != nil {
			log.Fatal(err)
		}
		if r.Converged {
			fmt.Printf("%v: nothing throttled from second %d\n", strategy, r.At)
		} else {
			fmt.Printf("%v: still throttling at second 30\n", strategy)
		}
	}
	// Output:
	// multiplicative: nothing throttled from second 17
	// constant: still throttling at second 30
}
