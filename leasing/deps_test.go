package leasing

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// A program that embeds only the Doorman client (as a channel does) links
// neither the server nor etcd, which the server's election will bring.
func TestClientImportsNoServerOrEtcd(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || !slices.Contains(deps, "google.golang.org/grpc") {
		t.Fatalf("go list -deps printed %d packages, not a dependency list:\n%s", len(deps), out)
	}
	for _, dep := range deps {
		for _, heavy := range []string{"go.etcd.io/", "github.com/sluice-rpc/sluice/leasing/server"} {
			if strings.HasPrefix(dep, heavy) {
				t.Errorf("leasing depends on %s (matches %q)", dep, heavy)
			}
		}
	}
}
