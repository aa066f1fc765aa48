package hostile_test

import (
	"context"
	"fmt"
	"os"

	"github.com/sluice-rpc/sluice/tools/benchmarks/hostile"
)

// The attacks a run makes, by name.
func ExampleParseAttacks() {
	attacks, err := hostile.ParseAttacks("checksum,stall-prehandshake")
	if err != nil {
		panic(err)
	}
	for _, a := range attacks {
		fmt.Printf("%s: %s\n", a, a.About())
	}
	// Output:
	// checksum: a call frame with checksum type 4, and one with no argument chunk
	// stall-prehandshake: connections that never send the init frame
}

// Two attacks at CI size against servers started from a sluice binary,
// printed as a Markdown table. (The binary running this must call
// hostile.RunChildIfAsked first thing in main or TestMain.)
func ExampleConfig_Run() {
	cfg := hostile.Config{
		Attacks:   []hostile.Attack{hostile.Checksum, hostile.StallHandshaken},
		Size:      hostile.CI,
		ServerBin: "/tmp/sluice",
		Progress:  os.Stderr,
	}
	results, err := cfg.Run(context.Background(), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	hostile.WriteTable(os.Stdout, results, true)
}
