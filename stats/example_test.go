package stats_test

import (
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
)

func Example() {
	scope := tally.NewTestScope("", nil)
	r := stats.NewRecorder(scope)
	r.Method("kv", "get").Call(2*time.Millisecond, "BUSY")
	c := scope.Snapshot().Counters()["call.errors+code=BUSY,method=get,service=kv"]
	fmt.Println(c.Name(), c.Tags()["code"], c.Value())
	// Output: call.errors BUSY 1
}
