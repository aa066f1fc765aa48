package channel

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
)

// A program that imports channel pays for tchannel-go, tally and
// opentracing, not for leasing's Doorman wire or a registry's client: no
// gRPC, protobuf, YAML or etcd among its dependencies. The same holds for
// discovery (the contracts channel.WithResolver takes) and discovery/dns;
// discovery/file pays for YAML, discovery/etcd for etcd, each alone.
func TestChannelImportsNoGRPCProtobufYAMLOrEtcd(t *testing.T) {
	heavy := []string{"google.golang.org/grpc", "google.golang.org/protobuf", "yaml", "go.etcd.io", "github.com/miekg/dns", "github.com/sluice-rpc/sluice/leasing"}
	for _, pkg := range []string{".", "../discovery", "../discovery/dns"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, h := range heavy {
				if strings.Contains(dep, h) {
					t.Errorf("%s depends on %s (matches %q)", pkg, dep, h)
				}
			}
		}
	}
}

// The go directive names the least Go release the dependencies allow (a
// minor version, or its first release x.y.0), never a later patch release a
// user would be forced onto.
func TestGoDirectiveIsNoPatchRelease(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	if !regexp.MustCompile(`^1\.\d+(\.0)?$`).Match(m[1]) {
		t.Errorf("go.mod says go %s: name a minor version (1.N) or its first release (1.N.0), not a patch release", m[1])
	}
}

// A raw and JSON client and server built on channel is at most 1.25 times
// the size of the same program on plain tchannel-go (both built by plain
// go build, with the same flags). Sluice's extra code is its own, not a
// dependency tree pulled in behind it.
func TestBinarySize(t *testing.T) {
	slowtest.Skip(t, "builds two programs")
	dir := t.TempDir()
	size := func(name string) int64 {
		bin := filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-o", bin, "./testdata/size/"+name).CombinedOutput()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, out)
		}
		fi, err := os.Stat(bin)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	sluice, plain := size("sluice"), size("plain")
	ratio := float64(sluice) / float64(plain)
	t.Logf("sluice %d bytes, plain tchannel-go %d bytes: x%.2f", sluice, plain, ratio)
	if ratio > 1.25 {
		t.Errorf("a program on channel is x%.2f the size of the same on plain tchannel-go (%d vs %d bytes), want at most x1.25", ratio, sluice, plain)
	}
}

// Every deferred call on the call and serve paths is open-coded: the
// compiler gives up on that in a function whose returns times deferred
// calls exceed 15, and then every call or request pays the runtime's
// deferred calls and a larger frame. The server's guard once had four
// deferred calls and five returns, which cost 2 to 3 points of
// BenchmarkJSONServerPaired. Cold code that needs a deferred call the
// compiler cannot open-code (one in a loop, say) belongs in another file.
func TestHotPathDefersAreOpenCoded(t *testing.T) {
	slowtest.Skip(t, "compiles the package")
	hot := map[string]bool{"attempt.go": true, "call.go": true, "callstate.go": true, "client.go": true,
		"frontends.go": true, "jsonserver.go": true, "policy.go": true, "server.go": true}
	out, err := exec.Command("go", "build", "-gcflags=github.com/sluice-rpc/sluice/channel=-d=defer", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	line := regexp.MustCompile(`(?m)^\./(\w+\.go):(\d+):\d+: (open-coded|stack-allocated|heap-allocated) defer$`)
	seen := map[string]bool{}
	for _, m := range line.FindAllStringSubmatch(string(out), -1) {
		seen[m[1]] = true
		if hot[m[1]] && m[3] != "open-coded" {
			t.Errorf("%s:%s: a %s defer on the call or serve path: give its function fewer returns or deferred calls (returns x defers at most 15), or move the cold path out", m[1], m[2], m[3])
		}
	}
	for _, f := range []string{"call.go", "server.go"} {
		if !seen[f] {
			t.Fatalf("the compiler reported no deferred call of %s; its -d=defer output changed:\n%s", f, out)
		}
	}
}
