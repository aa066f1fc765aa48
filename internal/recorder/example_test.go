package recorder_test

import (
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/internal/recorder"
	"github.com/uber-go/tally/v4"
)

func Example() {
	scope := tally.NewTestScope("", nil)
	r := recorder.New(scope)
	r.Method("kv", "get").Call(2*time.Millisecond, "BUSY")
	c := scope.Snapshot().Counters()["call.errors+code=BUSY,method=get,service=kv"]
	fmt.Println(c.Name(), c.Tags()["code"], c.Value())
	// Output: call.errors BUSY 1
}

// A call that took 3ms and sent 2 attempts: its latency lands in the 5ms
// bucket (above 2ms, up to 5ms), its attempts in bucket 2.
func ExampleMethod() {
	scope := tally.NewTestScope("", nil)
	m := recorder.New(scope).Method("kv", "get")
	m.Call(3*time.Millisecond, "")
	m.CallAttempts(2)

	hs := scope.Snapshot().Histograms()
	lat := hs["call.latency+method=get,service=kv"].Durations()
	att := hs["call.attempts+method=get,service=kv"].Values()
	fmt.Println("latency <= 2ms:", lat[2*time.Millisecond], "<= 5ms:", lat[5*time.Millisecond])
	fmt.Println("attempts 1:", att[1], "2:", att[2])
	// Output:
	// latency <= 2ms: 0 <= 5ms: 1
	// attempts 1: 0 2: 1
}
