package tail_test

import (
	"context"
	"os"

	"github.com/sluice-rpc/sluice/tools/benchmarks/tail"
)

// The README's comparison: about 35 s, so this example is compiled but not
// run by go test.
func ExampleCompare() {
	rows, err := tail.Compare(context.Background(), tail.Config{})
	if err != nil {
		panic(err)
	}
	tail.WriteTable(os.Stdout, rows)
}
