package balance_test

import (
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/balance"
)

// A service whose instances warm up for half a minute, and whose failing
// instances stay out for a minute at first: the rest keeps its defaults.
// Validate names the field and the rule a value breaks.
func Example() {
	c := balance.Config{
		SlowStart: balance.SlowStart{Window: 30 * time.Second},
		Ejection:  balance.Ejection{BaseTime: time.Minute},
	}
	fmt.Println(c.Validate())

	c.Ejection.MaxTime = 30 * time.Second
	fmt.Println(c.Validate())
	// Output:
	// <nil>
	// balance: Config.Ejection.MaxTime is 30s, must be >= BaseTime (1m0s)
}
