// Package etcdproc runs the etcd binary as a single-member cluster on
// 127.0.0.1, in a process of its own, as operators run it: for the
// library's etcd tests (internal/testkit/etcdtest) and the tools'
// benchmarks (tools/internal/etcdserver), which start it the same way.
package etcdproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

// Env names an etcd binary to run instead of the one on the PATH.
const Env = "SLUICE_ETCD"

// ReadyLimit bounds the wait for a started member to answer its health
// check.
const ReadyLimit = 20 * time.Second

// Binary returns the etcd binary to run: the one Env names, or etcd on the
// PATH (Debian's etcd-server installs it, 3.4 or later).
func Binary() (string, error) {
	if bin := os.Getenv(Env); bin != "" {
		return bin, nil
	}
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return "", errors.New("etcdproc: no etcd binary: install one (apt-get install etcd-server) or set " + Env)
	}
	return bin, nil
}

// Version returns the first line of bin --version ("etcd Version: 3.4.23").
func Version(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("etcdproc: %s --version: %w", bin, err)
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]), nil
}

// FreeURL returns http://127.0.0.1:PORT for a port free a moment ago, for
// a member's client or peer URL.
func FreeURL() (url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}, fmt.Errorf("etcdproc: find a free port: %w", err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

// FreeURLs returns two URLs http://127.0.0.1:PORT on ports free a moment
// ago, for a member's client and peer URLs.
func FreeURLs() (client, peer url.URL, err error) {
	if client, err = FreeURL(); err != nil {
		return
	}
	for peer == (url.URL{}) || peer == client { // the port just freed may come back
		if peer, err = FreeURL(); err != nil {
			return
		}
	}
	return client, peer, nil
}

// portAttempts bounds StartOnFreePorts's tries.
const portAttempts = 5

// StartOnFreePorts is Start with m's client and peer URLs on ports free a
// moment before. etcd cannot listen on port 0 and say which port it got,
// so a port found free can be taken by another process before etcd binds
// it (parallel tests each start members): a member that exits saying so
// is started again on other ports, up to portAttempts times. It returns
// the member as started.
func StartOnFreePorts(m Member) (*Process, Member, error) {
	var err error
	for range portAttempts {
		if m.Client, m.Peer, err = FreeURLs(); err != nil {
			return nil, m, err
		}
		var p *Process
		if p, err = Start(m); err == nil {
			return p, m, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			return nil, m, err
		}
	}
	return nil, m, fmt.Errorf("%w (on %d pairs of ports found free)", err, portAttempts)
}

// Member is what a run of the binary serves.
type Member struct {
	// Bin is the etcd binary.
	Bin string
	// Name is the member's name.
	Name string
	// Dir holds its data.
	Dir string
	// Client and Peer are its client and peer URLs.
	Client, Peer url.URL
	// Flags, if any, are passed to the binary after the ones Start sets
	// (the tests' shorter raft timing).
	Flags []string
	// Prepare, if set, adjusts the command before it starts (the tools
	// have it die with its parent).
	Prepare func(*exec.Cmd)
}

// Process is a running member.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it has exited and been reaped
	out    *headBuffer
}

// maxOutput is how much of a member's output a Process keeps, for the
// error when it exits early.
const maxOutput = 16 << 10

// Start runs m and returns once it answers its health check, at most
// ReadyLimit later; on an error nothing is left running.
func Start(m Member) (*Process, error) {
	args := []string{"--name", m.Name, "--data-dir", m.Dir,
		"--listen-client-urls", m.Client.String(), "--advertise-client-urls", m.Client.String(),
		"--listen-peer-urls", m.Peer.String(), "--initial-advertise-peer-urls", m.Peer.String(),
		"--initial-cluster", m.Name + "=" + m.Peer.String(), "--log-level", "error"}
	cmd := exec.Command(m.Bin, append(args, m.Flags...)...)
	p := &Process{cmd: cmd, exited: make(chan struct{}), out: &headBuffer{n: maxOutput}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if m.Prepare != nil {
		m.Prepare(cmd)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("etcdproc: start %s: %w", m.Bin, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	// No kept connection: its goroutines would outlive the member.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
	deadline := time.Now().Add(ReadyLimit)
	for {
		res, err := hc.Get(m.Client.String() + "/health")
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if strings.Contains(string(body), `"health":"true"`) && isMember(hc, m) {
				return p, nil
			}
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("etcdproc: %s exited: %s", m.Bin, p.out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("etcdproc: %s not healthy within %v: %v", m.Bin, ReadyLimit, err)
		}
	}
}

// isMember reports whether the etcd answering on m's client URL is m, by
// its peer URL (unique to the run): when another process took the port
// first, that may be another test's healthy member.
func isMember(hc *http.Client, m Member) bool {
	res, err := hc.Post(m.Client.String()+"/v3/cluster/member/list", "application/json", strings.NewReader("{}"))
	if err != nil {
		return false
	}
	defer res.Body.Close()
	var list struct {
		Members []struct {
			PeerURLs []string `json:"peerURLs"`
		} `json:"members"`
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		return false
	}
	for _, member := range list.Members {
		if slices.Contains(member.PeerURLs, m.Peer.String()) {
			return true
		}
	}
	return false
}

// Kill kills the member (SIGKILL: no chance to say goodbye to its
// clients) and waits for it to exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// headBuffer keeps the first n bytes written to it.
type headBuffer struct {
	mu sync.Mutex
	b  strings.Builder
	n  int
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rest := h.n - h.b.Len(); rest > 0 {
		h.b.Write(p[:min(len(p), rest)])
	}
	return len(p), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.b.String()
}
