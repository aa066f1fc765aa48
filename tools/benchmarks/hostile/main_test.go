package hostile

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var (
	fullSize   = flag.Bool("hostile.full", false, "also run every attack at full size (about ten minutes; 20,000 connections)")
	serverFlag = flag.String("hostile.server-bin", "", "attack this sluice-lab binary instead of one built from this module")
)

// binDir holds the sluice binary the tests build; TestMain removes it.
var binDir string

// TestMain acts as an attacker child (or a server's launcher) when the
// attacks re-execute this test binary (RunChildIfAsked), and otherwise
// runs the tests with goleak watching for goroutines left behind.
func TestMain(m *testing.M) {
	RunChildIfAsked()
	flag.Parse()
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left behind: %v\n", err)
			code = 1
		}
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// serverBin returns the binary to attack: -hostile.server-bin, or
// `go build` of this module's cmd/sluice-lab (the Doorman attacks need its
// doorman command), built once.
func serverBin(t *testing.T) string {
	t.Helper()
	if *serverFlag != "" {
		return *serverFlag
	}
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "sluice-hostile-test-"); buildErr != nil {
			return
		}
		builtBin = filepath.Join(binDir, "sluice-lab")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-o", builtBin, "github.com/sluice-rpc/sluice/tools/cmd/sluice-lab").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build cmd/sluice-lab: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}
