// Package etcdtest starts an etcd server for the library's tests of
// Doorman's master election and of configuration kept in etcd: the etcd
// binary (SLUICE_ETCD, or etcd on the PATH; CI installs Debian's
// etcd-server, 3.4), as operators run it, in its own process on 127.0.0.1.
// A test without one is skipped. Starting a binary rather than embedding
// etcd keeps etcd's server out of the library module's requirements, and
// so out of every importer's module graph; the tools module embeds one
// (tools/internal/testkit/etcdembed).
package etcdtest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Env names an etcd binary to use instead of the one on the PATH.
const Env = "SLUICE_ETCD"

// Start starts the etcd binary (SLUICE_ETCD, or the one on the PATH, as the
// Debian package etcd-server installs it: 3.4 or later) as a separate process, with its
// data in t.TempDir, and kills it when t ends. It skips t if there is no
// etcd binary, and fails it if etcd does not answer within 20 s.
func Start(t testing.TB) *Etcd {
	t.Helper()
	bin := os.Getenv(Env)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("etcd"); err != nil {
			t.Skip("etcdtest: no etcd binary: install one (apt-get install etcd-server) or set " + Env)
		}
	}
	client, peer := FreeURL(t), FreeURL(t)
	cmd := exec.Command(bin, "--name", "etcdtest", "--data-dir", t.TempDir(),
		"--listen-client-urls", client.String(), "--advertise-client-urls", client.String(),
		"--listen-peer-urls", peer.String(), "--initial-advertise-peer-urls", peer.String(),
		"--initial-cluster", "etcdtest="+peer.String(), "--log-level", "error")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("etcdtest: start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	version, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("etcdtest: %s --version: %v", bin, err)
	}
	e := &Etcd{Endpoint: client.String(), Version: strings.TrimSpace(strings.SplitN(string(version), "\n", 2)[0])}
	// No kept connection: its goroutines would outlive the test.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := hc.Get(e.Endpoint + "/health")
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if strings.Contains(string(body), `"health":"true"`) {
				return e
			}
		}
		select {
		case <-exited:
			t.Fatalf("etcdtest: %s exited: %s", bin, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcdtest: %s not healthy within 20s: %v", bin, err)
		}
	}
}

// Etcd is an etcd running in its own process.
type Etcd struct {
	// Endpoint is the client URL, http://127.0.0.1:PORT.
	Endpoint string
	// Version is the first line of etcd --version ("etcd Version: 3.4.23").
	Version string
}

// FreeURL returns http://127.0.0.1:PORT for a port free a moment ago,
// for an etcd member's client or peer URL.
func FreeURL(t testing.TB) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdtest: find a free port: %v", err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)}
}
