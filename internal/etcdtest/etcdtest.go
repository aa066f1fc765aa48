// Package etcdtest runs an etcd server embedded in the test process, on
// 127.0.0.1, for the tests of Doorman's master election and of
// configuration kept in etcd. One place starts it, so every test gets the
// same quick, quiet, fsync-free member.
package etcdtest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Etcd is a single-member etcd cluster running in the test process.
type Etcd struct {
	// Endpoint is the client URL, http://127.0.0.1:PORT.
	Endpoint string

	e *embed.Etcd
}

// Start starts an etcd member whose data lives in t.TempDir and stops it
// when t ends. It fails t if etcd is not ready within 20 s.
func Start(t testing.TB) *Etcd {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	// Quiet: a member stopping logs its listeners' closing as errors.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true
	client, peer := freeURL(t), freeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("etcdtest: start embedded etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		e.Close()
		t.Fatal("etcdtest: embedded etcd not ready within 20s")
	}
	et := &Etcd{Endpoint: client.String(), e: e}
	t.Cleanup(et.Stop)
	return et
}

// StartBinary starts the etcd found on the PATH (as the Debian package
// etcd-server installs it: 3.4 or later) as a separate process, with its
// data in t.TempDir, and kills it when t ends. It skips t if there is no
// etcd binary, and fails it if etcd does not answer within 20 s.
func StartBinary(t testing.TB) *External {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcdtest: no etcd binary on the PATH (apt-get install etcd-server)")
	}
	client, peer := freeURL(t), freeURL(t)
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
	e := &External{Endpoint: client.String(), Version: strings.TrimSpace(strings.SplitN(string(version), "\n", 2)[0])}
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

// External is an etcd running in its own process.
type External struct {
	// Endpoint is the client URL, http://127.0.0.1:PORT.
	Endpoint string
	// Version is the first line of etcd --version ("etcd Version: 3.4.23").
	Version string
}

// Stop stops the member; later calls do nothing.
func (et *Etcd) Stop() {
	if et.e != nil {
		et.e.Close()
		et.e = nil
	}
}

// freeURL returns http://127.0.0.1:PORT for a port free a moment ago.
func freeURL(t testing.TB) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdtest: find a free port: %v", err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)}
}
