package faults_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/faults"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// One small run of the baseline: three good servers, 20 calls at 100/s,
// no policy.
func ExampleRun() {
	r, err := faults.Run(context.Background(), faults.Config{
		Scenario: faults.None, Setup: faults.NoPolicy, Rate: 100, Duration: millis.Duration(200 * time.Millisecond),
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d calls, %d ok, %.2f attempts and %.2f executions per call, %d broken promises\n",
		r.Calls, r.OK, r.AttemptsPerCall(), r.ExecutionsPerCall(), len(faults.DefaultContract().Check(r)))
	// Output: 20 calls, 20 ok, 1.00 attempts and 1.00 executions per call, 0 broken promises
}

// The suite `sluice-lab faults --ci --scenarios kill` runs, printed as the CLI
// prints it. The binary must call faults.ServeChildIfAsked first thing
// (the test binary's TestMain does): kill runs its failing server in a
// child process. Not run by go test (its figures vary).
func ExampleSuite() {
	s := faults.Suite{Scenarios: []faults.Scenario{faults.Kill}, Size: faults.CI}
	results, err := s.Run(context.Background(), nil)
	if err != nil {
		panic(err)
	}
	faults.WriteTable(os.Stdout, results, false)
	faults.WriteChecks(os.Stdout, faults.DefaultContract(), results)
}

// The most connection attempts gRPC's backoff allows one peer from one to
// three seconds into an outage: the attempt at 2.08 s (waits of 0.8 s and
// 1.28 s, the shortest the jitter allows), plus one for when the first
// attempt was.
func ExampleMaxAttempts() {
	b := faults.DefaultContract().Backoff
	fmt.Println(faults.MaxAttempts(b, time.Second, 3*time.Second))
	// Output: 2
}

func ExampleParseScenarios() {
	list, err := faults.ParseScenarios("kill,freeze")
	if err != nil {
		panic(err)
	}
	for _, s := range list {
		fmt.Printf("%s: %s; setups %v\n", s, s.Describe(), s.Setups())
	}
	// Output:
	// kill: one of three, a child process, is killed with SIGKILL; setups [none retry hedge]
	// freeze: one of three, a child process, is stopped with SIGSTOP (no FIN; SIGCONT after the load); setups [none retry hedge]
}
