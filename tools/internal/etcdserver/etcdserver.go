// Package etcdserver runs a single-member etcd on 127.0.0.1 for the
// tools' benchmarks: the etcd binary in a process of its own when one is
// installed (etcdproc.Binary), as operators run it, or else one embedded
// in this process (StartEmbedded, which the tools' tests use).
package etcdserver

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/sluice-rpc/sluice/internal/etcdproc"
	"github.com/sluice-rpc/sluice/tools/internal/childproc"
)

// Config says which etcd to run.
type Config struct {
	// Dir holds the member's data; the caller removes it. Required.
	Dir string
	// Binary is the etcd binary to run; "" means the installed one, or
	// an embedded member when there is none.
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

	stop func()
}

// Start starts a member as cfg says and returns once it is ready (at most
// etcdproc.ReadyLimit).
func Start(cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("etcdserver: Config.Dir is empty; give a directory for the member's data")
	}
	bin := cfg.Binary
	if bin == "" {
		bin, _ = etcdproc.Binary() // "" when none is installed
	}
	if cfg.Embedded || bin == "" {
		return StartEmbedded(cfg.Dir)
	}
	version, err := etcdproc.Version(bin)
	if err != nil {
		return nil, err
	}
	p, m, err := etcdproc.StartOnFreePorts(etcdproc.Member{Bin: bin, Name: "sluice", Dir: cfg.Dir, Prepare: childproc.DieWithParent})
	if err != nil {
		return nil, err
	}
	return &Server{Endpoint: m.Client.String(), Kind: fmt.Sprintf("etcd binary %s (%s)", bin, version), stop: p.Kill}, nil
}

// StartEmbedded starts a member in this process, its data in dir. A port
// found free but taken meanwhile (by another test's member) has it try
// others, five times at most, as etcdproc.StartOnFreePorts does.
func StartEmbedded(dir string) (s *Server, err error) {
	for range 5 {
		if s, err = startEmbedded(dir); err == nil || !errors.Is(err, syscall.EADDRINUSE) && !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return s, err
}

func startEmbedded(dir string) (*Server, error) {
	client, peer, err := etcdproc.FreeURLs()
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
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(etcdproc.ReadyLimit):
		e.Close()
		return nil, fmt.Errorf("etcdserver: the embedded etcd was not ready within %v", etcdproc.ReadyLimit)
	}
	return &Server{Endpoint: client.String(), Kind: "embedded etcd " + version.Version, stop: e.Close}, nil
}

// Close stops the member and waits for it; later calls do nothing.
func (s *Server) Close() error {
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
	return nil
}
