package slowtest

import (
	"flag"
	"strconv"
)

// DefaultParallel sets -test.parallel to n unless the command line gave
// it; TestMain calls it before m.Run. It is for packages whose parallel
// tests mostly wait on real time (timeouts, graces, idle timers), not on
// a CPU: the default, GOMAXPROCS, would have them wait in turn on a small
// machine.
func DefaultParallel(n int) {
	flag.Parse()
	defaultParallel(flag.CommandLine, n)
}

func defaultParallel(fs *flag.FlagSet, n int) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := fs.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic("slowtest: " + err.Error()) // registered by the testing package: cannot fail
		}
	}
}
