// Package nodeinterop tests Sluice against tchannel-node peers, both ways: a
// Node client calling a Sluice server, and a Sluice client calling a Node
// server, with raw and JSON calls. Sluice's additions on the wire (the
// signal carrier negotiated at the handshake, the criticality and retry mark
// in the routing delegate, the notes in Busy messages, load reports, deadline
// refusals) are for Sluice peers; these tests show a Node peer works as it
// did with plain tchannel-go.
//
// The Node peers are the scripts server.js and client.js in this folder,
// run with the tchannel npm package that package.json and package-lock.json
// pin: `npm ci --prefix tools/internal/nodeinterop` installs it. Without
// `node` or the installed packages the tests skip, unless the environment
// has SLUICE_NODE_INTEROP set (CI sets it), when they fail.
package nodeinterop

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-rpc/sluice/tools/internal/childproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// requiredEnv makes a missing Node or npm install fail the tests instead of
// skipping them: CI sets it, after installing the packages.
const requiredEnv = "SLUICE_NODE_INTEROP"

// waitLimit bounds every wait for a Node peer's answer.
const waitLimit = 15 * time.Second

// nodeBinary returns the path of node, once it has checked that the npm
// packages are installed here; without them the test skips, or fails when
// requiredEnv is set.
func nodeBinary(t *testing.T) string {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv(requiredEnv) != "" {
			t.Fatalf("%s (%s is set, so the Node interop tests must run)", msg, requiredEnv)
		}
		t.Skipf("%s; skipping the Node interop tests (set %s=1 to make this a failure)", msg, requiredEnv)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("no node binary on PATH: install Node.js (20 or later)")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "tchannel", "package.json")); err != nil {
		missing("tchannel-node is not installed: run `npm ci --prefix tools/internal/nodeinterop` from the repository's root (%v)", err)
	}
	return node
}

// nodeProc is a running Node script: its standard output's lines, each a
// JSON object, come on lines.
type nodeProc struct {
	proc  *childproc.Proc
	lines chan string
	done  chan struct{} // closed at cleanup: OnLine stops waiting for a reader
}

// startNode runs script (server.js or client.js) with node and args, and
// ends it at the test's end.
func startNode(t *testing.T, script string, args ...string) *nodeProc {
	t.Helper()
	node := nodeBinary(t)
	n := &nodeProc{lines: make(chan string, 64), done: make(chan struct{})}
	p, err := childproc.Start(childproc.Config{
		Command: append([]string{node, script}, args...),
		OnLine: func(l string) {
			select {
			case n.lines <- l:
			case <-n.done:
			}
		},
	})
	if err != nil {
		t.Fatalf("start node %s: %v", script, err)
	}
	n.proc = p
	t.Cleanup(func() {
		close(n.done)
		if err := p.Close(5 * time.Second); err != nil {
			t.Errorf("node %s: %v", script, err)
		}
	})
	return n
}

// next decodes the script's next line into v.
func (n *nodeProc) next(t *testing.T, v any) {
	t.Helper()
	select {
	case l := <-n.lines:
		if err := json.Unmarshal([]byte(l), v); err != nil {
			t.Fatalf("node wrote %q: %v", l, err)
		}
	case <-n.proc.Exited():
		t.Fatalf("node exited before answering; its stderr:\n%s", n.proc.Stderr())
	case <-time.After(waitLimit):
		t.Fatalf("node said nothing within %v; its stderr:\n%s", waitLimit, n.proc.Stderr())
	}
}

// startNodeServer runs server.js, with args, and returns its host:port.
func startNodeServer(t *testing.T, args ...string) string {
	t.Helper()
	n := startNode(t, "server.js", args...)
	var hello struct {
		HostPort string `json:"hostPort"`
	}
	n.next(t, &hello)
	if hello.HostPort == "" {
		t.Fatal("node server.js named no hostPort")
	}
	return hello.HostPort
}

// nodeCall is one call for client.js (see its header).
type nodeCall struct {
	ID        int               `json:"id"`
	HostPort  string            `json:"hostPort"`
	Service   string            `json:"service"`
	Method    string            `json:"method"`
	As        string            `json:"as"`
	Arg2      string            `json:"arg2,omitempty"`
	Arg3      string            `json:"arg3,omitempty"`
	Head      map[string]string `json:"head,omitempty"`
	Body      any               `json:"body,omitempty"`
	TimeoutMS int               `json:"timeout,omitempty"`
	RD        string            `json:"rd,omitempty"`
	IDL       string            `json:"idl,omitempty"`
}

// nodeResult is client.js's answer to one call.
type nodeResult struct {
	ID      int               `json:"id"`
	OK      bool              `json:"ok"`
	Arg2    string            `json:"arg2"`
	Arg3    string            `json:"arg3"`
	Head    map[string]string `json:"head"`
	Body    json.RawMessage   `json:"body"`
	Headers map[string]string `json:"headers"`
	Err     *nodeError        `json:"err"`
}

// nodeError is a failed call as tchannel-node reports it.
type nodeError struct {
	Type     string `json:"type"`
	CodeName string `json:"codeName"`
	Message  string `json:"message"`
}

// nodeClient drives client.js: Send sends a call, Await waits for the
// answer to one.
type nodeClient struct {
	n *nodeProc

	mu      sync.Mutex
	id      int
	pending map[int]nodeResult // answers read while waiting for another
}

func startNodeClient(t *testing.T) *nodeClient {
	return &nodeClient{n: startNode(t, "client.js"), pending: map[int]nodeResult{}}
}

// Send sends c and returns its id.
func (c *nodeClient) Send(t *testing.T, call nodeCall) int {
	t.Helper()
	c.mu.Lock()
	c.id++
	call.ID = c.id
	c.mu.Unlock()
	b, err := json.Marshal(call)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.n.proc.Send(string(b)); err != nil {
		t.Fatal(err)
	}
	return call.ID
}

// Await returns the answer to the call with id.
func (c *nodeClient) Await(t *testing.T, id int) nodeResult {
	t.Helper()
	for {
		c.mu.Lock()
		r, ok := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ok {
			return r
		}
		var got nodeResult
		c.n.next(t, &got)
		c.mu.Lock()
		c.pending[got.ID] = got
		c.mu.Unlock()
	}
}

// Call sends call and waits for its answer.
func (c *nodeClient) Call(t *testing.T, call nodeCall) nodeResult {
	t.Helper()
	return c.Await(t, c.Send(t, call))
}

// errCode returns a failed call's error's code name, or says it did not
// fail with an error frame.
func (r nodeResult) errCode() string {
	if r.Err == nil {
		return fmt.Sprintf("no error (ok=%v)", r.OK)
	}
	return r.Err.CodeName
}
