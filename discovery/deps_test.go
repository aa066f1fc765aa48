package discovery_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A program that imports discovery (as channel does) pays for no
// registry's client: etcd's is discovery/etcd's alone; nor for
// tchannel-go, which a resolver outside a Channel does not need.
func TestImportsNoEtcd(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 3 || !strings.HasSuffix(deps[len(deps)-1], "/discovery") {
		t.Fatalf("go list -deps printed %d packages, not a dependency list ending in discovery:\n%s", len(deps), out)
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "go.etcd.io/") || strings.HasPrefix(dep, "github.com/uber/tchannel-go") {
			t.Errorf("discovery depends on %s", dep)
		}
	}
}
