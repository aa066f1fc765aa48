package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"

	"github.com/sluice-rpc/sluice/stats"
)

// DefaultPollInterval is how often WatchFile reads its file when the
// interval given is 0.
const DefaultPollInterval = 2 * time.Second

// MaxConfigSize bounds a configuration read by WatchFile (and by the etcd
// watcher): a larger one is refused, so that a runaway file cannot make
// the server read without bound.
const MaxConfigSize = 16 << 20

// ReloadConfig configures a Reloader.
type ReloadConfig struct {
	// Logger receives a line for each configuration applied (at Info)
	// or refused (at Warn), and for each failure to read one (at Warn,
	// once until a read succeeds); nil means slog.Default(), read when a
	// line is written.
	Logger *slog.Logger
	// Scope receives stats.LeaseConfigReloads tagged applied or refused;
	// nil means tally.NoopScope.
	Scope tally.Scope
}

// Reloader applies new configurations to a running Server. Each one is
// parsed and validated as a whole (ParseRepository) and put in force with
// Server.SetRepository; one that fails is refused, logged with the
// reason, and the configuration in force stays, untouched: nothing is
// ever half-applied. A configuration identical to the last one seen,
// applied or refused, is ignored, so a watcher may hand the Reloader the
// same bytes again and again. A configuration without templates is
// refused too: it is what a file being rewritten in place reads for a
// moment, and it would lift every limit.
//
// Sources: WatchFile polls a file; package etcdconfig watches an etcd
// key. A Reloader is safe for concurrent use.
type Reloader struct {
	srv              *Server
	logger           *slog.Logger // nil: slog.Default()
	applied, refused tally.Counter

	mu      sync.Mutex
	seen    bool
	last    [sha256.Size]byte // of the last configuration seen
	lastErr error             // why it was refused, or nil
	failed  string            // the last read error logged, "" after a success
}

// Validate returns nil: every ReloadConfig is valid (nil fields mean
// slog.Default() and tally.NoopScope).
func (ReloadConfig) Validate() error { return nil }

// NewReloader returns a Reloader applying configurations to srv.
func NewReloader(srv *Server, cfg ReloadConfig) *Reloader {
	if cfg.Scope == nil {
		cfg.Scope = tally.NoopScope
	}
	return &Reloader{
		srv:     srv,
		logger:  cfg.Logger,
		applied: cfg.Scope.Tagged(map[string]string{stats.LeaseTagOutcome: stats.LeaseOutcomeApplied}).Counter(stats.LeaseConfigReloads),
		refused: cfg.Scope.Tagged(map[string]string{stats.LeaseTagOutcome: stats.LeaseOutcomeRefused}).Counter(stats.LeaseConfigReloads),
	}
}

// Loaded records data as the configuration the server started with, so
// that it is not applied again.
func (r *Reloader) Loaded(data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen, r.last, r.lastErr = true, sha256.Sum256(data), nil
}

// Apply parses data, read from origin (a file name, an etcd key), and
// puts it in force, unless it is the configuration last seen. It returns
// why a configuration was refused (the one last seen: the same error
// again), the error naming origin and the rule broken; the configuration
// in force is then unchanged.
func (r *Reloader) Apply(data []byte, origin string) error {
	sum := sha256.Sum256(data)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = ""
	if r.seen && sum == r.last {
		return r.lastErr
	}
	r.seen, r.last = true, sum
	repo, err := ParseRepository(data)
	if err == nil && len(repo.Resources) == 0 {
		// A file being rewritten in place reads empty for a moment; an
		// empty configuration would lift every limit.
		err = errors.New("it has no templates (a file being rewritten reads empty for a moment, and a server without templates would hand every client what it asks for; restart the server to run one)")
	}
	if err == nil {
		err = r.srv.SetRepository(repo)
	}
	if err != nil {
		r.lastErr = fmt.Errorf("configuration from %s refused, the one in force stays: %w", origin, err)
		r.refused.Inc(1)
		r.log().Warn("doorman server: "+r.lastErr.Error(), "origin", origin)
		return r.lastErr
	}
	r.lastErr = nil
	r.applied.Inc(1)
	r.log().Info(fmt.Sprintf("doorman server: configuration from %s applied: %d templates", origin, len(repo.Resources)), "origin", origin)
	return nil
}

// Failed logs that a configuration could not be read from its source;
// the configuration in force stays. The same error is logged once until
// a configuration is read again.
func (r *Reloader) Failed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if msg := err.Error(); msg != r.failed {
		r.failed = msg
		r.log().Warn("doorman server: "+msg+"; the configuration in force stays", "error", err)
	}
}

// log returns the Reloader's logger: ReloadConfig.Logger, or
// slog.Default().
func (r *Reloader) log() *slog.Logger {
	if r.logger == nil {
		return slog.Default()
	}
	return r.logger
}

// WatchFile applies the configuration in file to the Reloader's server
// whenever it changes, until ctx ends; it returns nil then. It reads the
// file every interval (0 means DefaultPollInterval) on the server's clock
// and hands its content to r, which ignores what it has seen: a change is
// any change of content, whatever happens to the file's time or size,
// and a file replaced by a rename (as editors and Kubernetes' ConfigMaps
// do) is read like any other. A file that cannot be read, or is larger
// than MaxConfigSize, is logged through r and the configuration in force
// stays.
//
// Write a configuration atomically (to another file, then rename it): a
// file caught half-written is refused, then applied at the next read.
func WatchFile(ctx context.Context, file string, interval time.Duration, r *Reloader) error {
	if file == "" {
		return errors.New("server: WatchFile: file is empty, want the configuration's path")
	}
	if interval < 0 {
		return fmt.Errorf("server: WatchFile: interval is %v, must be >= 0 (0 means %v)", interval, DefaultPollInterval)
	}
	if interval == 0 {
		interval = DefaultPollInterval
	}
	clk := r.srv.clock
	for {
		t := clk.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		data, err := ReadConfig(file)
		if err != nil {
			r.Failed(err)
			continue
		}
		_ = r.Apply(data, file) // logged by r
	}
}

// ReadConfig reads a configuration file, refusing one larger than
// MaxConfigSize; errors name the file.
func ReadConfig(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("server: reading configuration: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("server: reading configuration: %w", err)
	}
	if len(data) > MaxConfigSize {
		return nil, fmt.Errorf("server: configuration %s is larger than %d bytes", file, MaxConfigSize)
	}
	return data, nil
}
