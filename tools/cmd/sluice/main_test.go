package main

import (
	"os/exec"
	"strings"
	"testing"
)

// heavy are the modules the everyday binary must not link: they are
// sluice-lab's (charts, fault injection's proxies and its logger, an
// embedded etcd server and what that server brings, etcd's client and
// gRPC under Doorman and etcd:// targets).
var heavy = []string{
	"google.golang.org/grpc",
	"go.etcd.io/etcd/client",
	"go.uber.org/zap",
	"gonum.org/v1/plot",
	"github.com/Shopify/toxiproxy",
	"github.com/rs/zerolog",
	"go.etcd.io/etcd/server",
	"go.etcd.io/bbolt",
	"go.etcd.io/raft",
	"go.opentelemetry.io/otel/sdk",
}

// deps lists the packages pkg links, as the go command resolves them.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// sluice links none of the heavy modules, so that a first `go run
// ./tools/cmd/sluice demo` downloads and builds little; sluice-lab, which
// has what needs them, links them (the check can see them).
func TestEverydayBinaryStaysLean(t *testing.T) {
	for _, p := range deps(t, "github.com/sluice-rpc/sluice/tools/cmd/sluice") {
		for _, h := range heavy {
			if p == h || strings.HasPrefix(p, h+"/") {
				t.Errorf("sluice links %s (module %s): move what needs it to sluice-lab", p, h)
			}
		}
	}
	lab := strings.Join(deps(t, "github.com/sluice-rpc/sluice/tools/cmd/sluice-lab"), "\n") + "\n"
	for _, h := range []string{"gonum.org/v1/plot", "github.com/Shopify/toxiproxy", "go.etcd.io/etcd/server/v3/embed", "google.golang.org/grpc", "go.etcd.io/etcd/client/v3"} {
		if !strings.Contains(lab, "\n"+h+"\n") && !strings.Contains(lab, "\n"+h+"/") {
			t.Errorf("sluice-lab does not link %s: is the check blind?", h)
		}
	}
}
