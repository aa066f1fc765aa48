// Package etcdserver runs a single-member etcd on 127.0.0.1 for the
// tools' benchmarks: the etcd binary in a process of its own when one is
// installed (SLUICE_ETCD, or etcd on the PATH; Debian's etcd-server, 3.4 or
// later), as operators run it, or else one embedded in this process. The
// tools' tests embed theirs through internal/testkit/etcdembed, which
// starts it here.
package etcdserver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/sluice-rpc/sluice/tools/internal/childproc"
)

// Env names an etcd binary to run instead of the one on the PATH (the
// library's etcd tests read it too).
const Env = "SLUICE_ETCD"

// ReadyLimit bounds the wait for a new member to be ready.
const ReadyLimit = 20 * time.Second

// Config says which etcd to run.
type Config struct {
	// Dir holds the member's data; the caller removes it. Required.
	Dir string
	// Binary is the etcd binary to run. "" means the one Env names, or
	// etcd on the PATH, or, when there is neither, an embedded member.
	Binary string
	// Embedded runs the member in this process, whatever is installed.
	Embedded bool
}

// Server is a running member.
type Server struct {
	// Endpoint is its client URL, http://127.0.0.1:PORT.
	Endpoint string
	// Kind says what runs it: "etcd binary /usr/bin/etcd (etcd Version:
	// 3.4.23)" or "embedded etcd 3.x".
	Kind string

	stop func() error
}

// Start starts a member as cfg says and returns once it is ready (at most
// ReadyLimit).
func Start(cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("etcdserver: Config.Dir is empty; give a directory for the member's data")
	}
	if cfg.Embedded {
		return StartEmbedded(cfg.Dir)
	}
	bin := cfg.Binary
	if bin == "" {
		bin = os.Getenv(Env)
	}
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("etcd"); err != nil {
			return StartEmbedded(cfg.Dir)
		}
	}
	return startBinary(bin, cfg.Dir)
}

// StartEmbedded starts a member in this process, its data in dir.
func StartEmbedded(dir string) (*Server, error) {
	client, peer, err := freeURLs()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	// Quiet: a member stopping logs its listeners' closing as errors.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: start an embedded etcd: %w", err)
	}
	t := time.NewTimer(ReadyLimit)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case <-t.C:
		e.Close()
		return nil, fmt.Errorf("etcdserver: the embedded etcd was not ready within %v", ReadyLimit)
	}
	return &Server{Endpoint: client.String(), Kind: "embedded etcd " + version.Version,
		stop: func() error { e.Close(); return nil }}, nil
}

// startBinary starts the etcd binary bin with its data in dir.
func startBinary(bin, dir string) (*Server, error) {
	client, peer, err := freeURLs()
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("etcdserver: %s --version: %w", bin, err)
	}
	cmd := exec.Command(bin, "--name", "sluice", "--data-dir", dir,
		"--listen-client-urls", client.String(), "--advertise-client-urls", client.String(),
		"--listen-peer-urls", peer.String(), "--initial-advertise-peer-urls", peer.String(),
		"--initial-cluster", "sluice="+peer.String(), "--log-level", "error")
	logs := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = io.Discard, &limitedWriter{b: logs, n: 4096}
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("etcdserver: start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	s := &Server{Endpoint: client.String(),
		Kind: fmt.Sprintf("etcd binary %s (%s)", bin, strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])),
		stop: func() error {
			cmd.Process.Kill()
			<-exited
			return nil
		}}
	// No kept connection: its goroutines would outlive the server.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
	deadline := time.Now().Add(ReadyLimit)
	for {
		res, err := hc.Get(s.Endpoint + "/health")
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if strings.Contains(string(body), `"health":"true"`) {
				return s, nil
			}
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("etcdserver: %s exited: %s", bin, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("etcdserver: %s not healthy within %v: %v", bin, ReadyLimit, err)
		}
	}
}

// Close stops the member and waits for it; later calls do nothing.
func (s *Server) Close() error {
	if s.stop == nil {
		return nil
	}
	stop := s.stop
	s.stop = nil
	return stop()
}

// freeURLs returns two URLs http://127.0.0.1:PORT on ports free a moment
// ago, for a member's client and peer URLs.
func freeURLs() (client, peer url.URL, err error) {
	var us [2]url.URL
	for i := range us {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return url.URL{}, url.URL{}, fmt.Errorf("etcdserver: find a free port: %w", err)
		}
		defer l.Close() // both held until both are chosen
		us[i] = url.URL{Scheme: "http", Host: l.Addr().String()}
	}
	return us[0], us[1], nil
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	b *strings.Builder
	n int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if rest := w.n - w.b.Len(); rest > 0 {
		w.b.Write(p[:min(len(p), rest)])
	}
	return len(p), nil
}
