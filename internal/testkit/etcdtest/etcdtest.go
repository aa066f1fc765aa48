// Package etcdtest starts an etcd server for the library's tests of
// Doorman's master election, of configuration kept in etcd and of
// discovery through etcd: the etcd binary (SLUICE_ETCD, or etcd on the
// PATH; CI installs Debian's etcd-server, 3.4), as operators run it, in its
// own process on 127.0.0.1. A test without one is skipped. Starting a
// binary rather than embedding etcd keeps etcd's server out of the library
// module's requirements, and so out of every importer's module graph; the
// tools module embeds one (tools/internal/testkit/etcdembed).
//
// A test can take the server down and bring it back on the same ports
// (Kill, Restart), or bring back an empty one, as after an operator
// replaced its data directory (RestartEmpty): its revisions start again
// from 1 and its leases are gone.
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

// healthTimeout bounds the wait for a started etcd to answer.
const healthTimeout = 20 * time.Second

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
	version, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("etcdtest: %s --version: %v", bin, err)
	}
	client := FreeURL(t)
	e := &Etcd{Endpoint: client.String(), Version: strings.TrimSpace(strings.SplitN(string(version), "\n", 2)[0]),
		t: t, bin: bin, client: client, peer: FreeURL(t), dataDir: t.TempDir()}
	t.Cleanup(e.Kill)
	e.start()
	return e
}

// Etcd is an etcd running in its own process. Call its methods from the
// test's goroutine: they may fail the test.
type Etcd struct {
	// Endpoint is the client URL, http://127.0.0.1:PORT.
	Endpoint string
	// Version is the first line of etcd --version ("etcd Version: 3.4.23").
	Version string

	t            testing.TB
	bin          string
	client, peer url.URL
	dataDir      string
	proc         *process // nil while killed
}

// process is one run of the etcd binary.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it has exited
	out    *bytes.Buffer // its output, read only once it has exited
}

// Kill kills etcd (SIGKILL: no chance to say goodbye to its clients) and
// waits for it to exit. Its data stays for Restart. Killing a killed etcd
// does nothing.
func (e *Etcd) Kill() {
	if e.proc == nil {
		return
	}
	_ = e.proc.cmd.Process.Kill()
	<-e.proc.exited
	e.proc = nil
}

// Restart kills etcd if it runs and starts it again on the same ports
// with the same data: clients reconnect to the store they knew. It fails
// the test if etcd does not answer within 20 s.
func (e *Etcd) Restart() {
	e.t.Helper()
	e.Kill()
	e.start()
}

// RestartEmpty kills etcd if it runs and starts it again on the same
// ports with a new, empty data directory, as an operator who replaced a
// broken member's data would: same endpoint and member name, but the
// keys and leases are gone and the revisions start again from 1. It fails
// the test if etcd does not answer within 20 s.
func (e *Etcd) RestartEmpty() {
	e.t.Helper()
	e.Kill()
	e.dataDir = e.t.TempDir()
	// Cleanups run last first: kill etcd before its new directory goes.
	e.t.Cleanup(e.Kill)
	e.start()
}

// start runs the binary on e's ports and data directory and waits until
// it answers.
func (e *Etcd) start() {
	t := e.t
	t.Helper()
	cmd := exec.Command(e.bin, "--name", "etcdtest", "--data-dir", e.dataDir,
		"--listen-client-urls", e.client.String(), "--advertise-client-urls", e.client.String(),
		"--listen-peer-urls", e.peer.String(), "--initial-advertise-peer-urls", e.peer.String(),
		"--initial-cluster", "etcdtest="+e.peer.String(), "--log-level", "error")
	p := &process{cmd: cmd, exited: make(chan struct{}), out: new(bytes.Buffer)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("etcdtest: start %s: %v", e.bin, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	e.proc = p
	// No kept connection: its goroutines would outlive the test.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
	deadline := time.Now().Add(healthTimeout)
	for {
		res, err := hc.Get(e.Endpoint + "/health")
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if strings.Contains(string(body), `"health":"true"`) {
				return
			}
		}
		select {
		case <-p.exited:
			e.proc = nil
			t.Fatalf("etcdtest: %s exited: %s", e.bin, p.out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcdtest: %s not healthy within %v: %v", e.bin, healthTimeout, err)
		}
	}
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
