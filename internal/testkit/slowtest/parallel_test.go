package slowtest

import (
	"flag"
	"testing"
)

// DefaultParallel raises -test.parallel unless the command line set it.
func TestDefaultParallel(t *testing.T) {
	f := flag.Lookup("test.parallel")
	old := f.Value.String()
	t.Cleanup(func() { _ = flag.Set("test.parallel", old) })
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	DefaultParallel(7)
	want := "7"
	if given {
		want = old
	}
	if got := f.Value.String(); got != want {
		t.Fatalf("-test.parallel %s after DefaultParallel(7) (given on the command line: %v), want %s", got, given, want)
	}
}
