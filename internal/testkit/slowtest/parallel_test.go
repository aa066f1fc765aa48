package slowtest

import (
	"flag"
	"testing"
)

// DefaultParallel raises -test.parallel unless the command line set it.
func TestDefaultParallel(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int
	}{
		{nil, 7},
		{[]string{"-test.parallel=3"}, 3},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		parallel := fs.Int("test.parallel", 2, "")
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		defaultParallel(fs, 7)
		if *parallel != tt.want {
			t.Errorf("-test.parallel %d after defaultParallel(7) with arguments %q, want %d", *parallel, tt.args, tt.want)
		}
	}
}
