package tlsfiles_test

import (
	"os/exec"
	"strings"
	"testing"
)

// tlsfiles is the TLS helper of the channel, which a program pays for
// without gRPC: it imports the standard library, Sluice's clock, its guarded
// read of local files and its configuration error type only.
func TestImportsStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"github.com/sluice-rpc/sluice/tlsfiles": true,
		"github.com/sluice-rpc/sluice/clock":    true,
		// clock's: whether a context ended; the standard library only.
		"github.com/sluice-rpc/sluice/internal/ctxerr": true,
		// The guarded read of local files, shared with the rest of
		// Sluice; it imports the standard library only.
		"github.com/sluice-rpc/sluice/internal/localfile": true,
		// The configuration error type (retry.FieldError); it imports
		// the standard library only.
		"github.com/sluice-rpc/sluice/internal/config": true,
	}
	for _, dep := range strings.Fields(string(out)) {
		if !allowed[dep] {
			t.Errorf("tlsfiles depends on %s; it may import the standard library and sluice/clock only (no gRPC, no tchannel-go)", dep)
		}
	}
}
