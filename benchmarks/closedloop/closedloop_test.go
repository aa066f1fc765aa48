package closedloop

import (
	"context"
	"flag"
	"os"
	"testing"
)

var full = flag.Bool("closedloop", false, "run the full closed-loop comparison (N=8, d=2ms, 2C, 10 s per run) and print its table")

func TestFullTable(t *testing.T) {
	if !*full {
		t.Skip("run with -closedloop")
	}
	res, err := Run(context.Background(), Config{Progress: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	res.WriteTable(os.Stdout)
	if err := res.WriteChart(os.TempDir() + "/closedloop.png"); err != nil {
		t.Fatal(err)
	}
}
