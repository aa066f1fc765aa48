// Package etcdtest starts an etcd server for the library's tests of
// Doorman's master election, of configuration kept in etcd and of
// discovery through etcd: the etcd binary (SLUICE_ETCD, or etcd on the
// PATH; CI installs Debian's etcd-server, 3.4), as operators run it, in its
// own process on 127.0.0.1. A test without one is skipped. Starting a
// binary rather than embedding etcd keeps etcd's server out of the library
// module's requirements, and so out of every importer's module graph; the
// tools module embeds one (tools/internal/etcdserver).
//
// The member runs with raft's heartbeat at 10 ms and its election timeout
// at 100 ms (etcd's defaults are 100 ms and 1 s). It is alone, so the
// timeout only delays its first election, after each start and restart
// (by up to 2 s with the defaults), and no peer can miss a heartbeat. It
// also sets etcd's minimum lease TTL (1.5 election timeouts, rounded up
// to whole seconds): 1 s here, 2 s with the defaults.
//
// A test can take the server down and bring it back on the same ports
// (Kill, Restart), or bring back an empty one, as after an operator
// replaced its data directory (RestartEmpty): its revisions start again
// from 1 and its leases are gone.
package etcdtest

import (
	"testing"

	"github.com/sluice-rpc/sluice/internal/etcdproc"
)

// Start starts the etcd binary (SLUICE_ETCD, or the one on the PATH, as the
// Debian package etcd-server installs it: 3.4 or later) as a separate process, with its
// data in t.TempDir, and kills it when t ends. It skips t if there is no
// etcd binary, and fails it if etcd does not answer within 20 s.
func Start(t testing.TB) *Etcd {
	t.Helper()
	bin, err := etcdproc.Binary()
	if err != nil {
		t.Skip(err)
	}
	version, err := etcdproc.Version(bin)
	if err != nil {
		t.Fatal(err)
	}
	e := &Etcd{Version: version, t: t}
	t.Cleanup(e.Kill)
	p, m, err := etcdproc.StartOnFreePorts(etcdproc.Member{Bin: bin, Name: "etcdtest", Dir: t.TempDir(), Flags: fastRaft})
	if err != nil {
		t.Fatal(err)
	}
	e.Endpoint, e.m, e.proc = m.Client.String(), m, p
	return e
}

// fastRaft is the raft timing of the tests' single member (see the
// package doc).
var fastRaft = []string{"--heartbeat-interval", "10", "--election-timeout", "100"}

// Etcd is an etcd running in its own process. Call its methods from the
// test's goroutine: they may fail the test.
type Etcd struct {
	// Endpoint is the client URL, http://127.0.0.1:PORT.
	Endpoint string
	// Version is the first line of etcd --version ("etcd Version: 3.4.23").
	Version string

	t    testing.TB
	m    etcdproc.Member
	proc *etcdproc.Process // nil while killed
}

// Kill kills etcd (SIGKILL: no chance to say goodbye to its clients) and
// waits for it to exit. Its data stays for Restart. Killing a killed etcd
// does nothing.
func (e *Etcd) Kill() {
	if e.proc == nil {
		return
	}
	e.proc.Kill()
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
	e.m.Dir = e.t.TempDir()
	// Cleanups run last first: kill etcd before its new directory goes.
	e.t.Cleanup(e.Kill)
	e.start()
}

// start runs the binary on e's ports and data directory and waits until
// it answers.
func (e *Etcd) start() {
	e.t.Helper()
	p, err := etcdproc.Start(e.m)
	if err != nil {
		e.t.Fatal(err)
	}
	e.proc = p
}
