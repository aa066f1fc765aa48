package balancing_test

import (
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/balance"
	"github.com/sluice-rpc/sluice/internal/balancing"
)

// A peer that became ready 2.5 s ago takes a quarter of its weight under
// the default slow start; a peer ejected for the third time in a row stays
// out 90 s; a shard key's home of weight 1 among 10 takes at most 13 of
// 100 calls in flight.
func Example() {
	var c balance.Config // the defaults
	fmt.Println(balancing.SlowStart(c.SlowStart).Factor(2500 * time.Millisecond))
	fmt.Println(balancing.Ejection(c.Ejection).Duration(3))
	fmt.Println(balancing.Capacity(balancing.Factor(c), 99, 1, 10))

	r, err := balancing.NewRing([]string{"10.0.0.1:4040", "10.0.0.2:4040", "10.0.0.3:4040"}, nil)
	if err != nil {
		panic(err)
	}
	home := r.Home(balancing.KeyHash("user-42"))
	fmt.Println(home == r.Home(balancing.KeyHash("user-42")))
	// Output:
	// 0.25
	// 1m30s
	// 13
	// true
}
