package balancing_test

import (
	"context"
	"fmt"
	"os"

	"github.com/sluice-rpc/sluice/tools/benchmarks/balancing"
)

// A program that runs two of the scenarios at the CI size and prints
// their tables and verdicts. Not run by go test (its figures vary).
func Example() {
	res, err := balancing.Run(context.Background(), balancing.Config{
		Scenarios: []balancing.Scenario{balancing.ScaleOut, balancing.Erroring},
		Size:      balancing.CI,
		Progress:  func(s string) { fmt.Fprintln(os.Stderr, s) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	res.WriteTable(os.Stdout)
}

// Config's zero fields mean the defaults; Validate names the first field
// out of range.
func ExampleConfig_Validate() {
	fmt.Println(balancing.Config{}.Validate())
	fmt.Println(balancing.Config{Shard: balancing.ShardConfig{Zipf: 0.9}}.Validate())
	fmt.Println(balancing.Config{Heterogeneous: balancing.HeterogeneousConfig{Workers: []int{1, 2}, Weights: []float64{1}}}.Validate())
	// Output:
	// <nil>
	// balancing: Shard.Zipf is 0.9, must be in (1, 10]
	// balancing: Heterogeneous.Weights has 1 weights for 2 servers, must have one per server
}
