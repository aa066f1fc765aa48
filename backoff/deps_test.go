package backoff

import (
	"os/exec"
	"strings"
	"testing"
)

// backoff is a leaf: retry, peer and leasing import it, so it imports
// none of Sluice's packages (a cycle, or weight for all three, otherwise)
// but internal/config, the configuration error type, itself a leaf.
func TestImportsNothingOfSluice(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 3 || !strings.HasSuffix(deps[len(deps)-1], "/backoff") {
		t.Fatalf("go list -deps printed %d packages, not a dependency list ending in backoff:\n%s", len(deps), out)
	}
	for _, dep := range deps[:len(deps)-1] {
		if strings.HasPrefix(dep, "github.com/sluice-rpc/") && dep != "github.com/sluice-rpc/sluice/internal/config" {
			t.Errorf("backoff depends on %s", dep)
		}
	}
}
