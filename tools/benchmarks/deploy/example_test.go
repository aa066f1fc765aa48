package deploy_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/deploy"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// A program that runs the benchmark lets the fleet's servers, which are
// this very binary re-executed, take over first thing; then it runs the
// rows it wants and prints the table. Not run by go test (it takes a
// minute, and its figures vary).
func Example() {
	deploy.ServeChildIfAsked() // first thing in main

	rows, err := deploy.ParseRows("dns,static")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	res, err := deploy.Run(context.Background(), deploy.Config{
		Rows:         rows,
		Replacements: 4, // every instance once
		Steady:       millis.Duration(3 * time.Second),
		Progress:     func(s string) { fmt.Fprintln(os.Stderr, s) },
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
	fmt.Println(deploy.Config{}.Validate())
	fmt.Println(deploy.Config{Grace: millis.Duration(time.Second)}.Validate())
	// Output:
	// <nil>
	// deploy: Grace is 1s, must outlast DNSPeriod (2s): a leaving server must serve until every client has looked its record up again
}
