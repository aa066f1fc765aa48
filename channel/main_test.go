package channel

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

// parallelDefault is -parallel unless the command line gives it. The
// tests that call t.Parallel are those that mostly wait on real time
// (timeouts, graces, idle timers), not on the CPU: the default, GOMAXPROCS,
// would have them wait in turn on a small machine.
const parallelDefault = "8"

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", parallelDefault); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}
