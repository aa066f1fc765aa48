package pool_test

import (
	"fmt"

	"github.com/sluice-rpc/sluice/internal/pool"
)

// DefaultConnectBackoff is gRPC's connection backoff; r = 0.5 draws the
// middle of the +-20 % jitter, which is the ceiling itself.
func ExampleDefaultConnectBackoff() {
	b := pool.DefaultConnectBackoff()
	for n := 1; n <= 4; n++ {
		fmt.Print(b.Delay(n, 0.5), " ")
	}
	fmt.Println("...", b.Delay(20, 0.5))
	// Output:
	// 1s 1.6s 2.56s 4.096s ... 2m0s
}
