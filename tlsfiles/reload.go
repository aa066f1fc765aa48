package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/config"
)

// DefaultReloadInterval is how often, at most, a Reloader looks at its
// files when Config.ReloadInterval is 0.
const DefaultReloadInterval = time.Second

// Config configures a Reloader. The zero value of every field but Files
// means its default.
type Config struct {
	// Files names the PEM files to read.
	Files Files
	// ReloadInterval is the least time between two looks at the files
	// from handshakes, >= 0: 0 means DefaultReloadInterval, unless
	// NoReload is set.
	ReloadInterval time.Duration
	// NoReload turns the looks from handshakes off, leaving the files as
	// New read them until Reload is called. ReloadInterval must then be 0.
	NoReload bool
	// Clock times ReloadInterval; nil means clock.Real. It times nothing
	// else: certificates are checked against the wall clock, as
	// crypto/tls does.
	Clock clock.Clock
	// Logger receives a line at Warn for each file that changed and did
	// not load (the last good one stays in use), once per change and on
	// each Reload that finds it still so, with the error in the attribute
	// error; LastError keeps it for a program that acts on it. Nil means
	// slog.Default(), read when a line is written. It is called on the
	// goroutine of the handshake (or the Reload call) that found the
	// change.
	Logger *slog.Logger
}

// Validate reports the first thing wrong with c, as a *retry.FieldError:
// that of c.Files (see Files.Validate), or of ReloadInterval. It reads no
// file.
func (c Config) Validate() error {
	if err := c.Files.Validate(); err != nil {
		return config.Nest(err, "tlsfiles", "Config.Files")
	}
	switch {
	case c.ReloadInterval < 0:
		return config.Errorf("tlsfiles", "Config.ReloadInterval", c.ReloadInterval, "must be >= 0 (0 means the default, %v; NoReload turns the looks off)", DefaultReloadInterval)
	case c.NoReload && c.ReloadInterval != 0:
		return config.Errorf("tlsfiles", "Config.ReloadInterval", c.ReloadInterval, "must be 0 when NoReload is set")
	}
	return nil
}

// Reloader holds the certificate, key and CA its Files name, as last
// loaded, and makes the TLS configurations that use them. It is safe for
// concurrent use.
//
// Invariants: the certificate in use is always a pair that loaded as one
// (never a new certificate with an old key); the CA in use always loaded
// whole; once New succeeds, a certificate or CA its Files name is never
// absent, whatever happens to the files. The files are looked at, from handshakes, at most once per
// ReloadInterval, and no handshake waits for another's look. A Reloader
// starts no goroutine: drop it when done.
type Reloader struct {
	files    Files
	interval time.Duration // <= 0: no looks from handshakes
	clock    clock.Clock
	logger   *slog.Logger // nil: slog.Default()

	cur atomic.Pointer[loaded]

	// mu is held by the look at the files in progress; handshakes only
	// try it, Reload and LastError wait for it.
	mu              sync.Mutex
	next            time.Time   // when handshakes next look at the files
	certSeen        os.FileInfo // Cert as last read, nil when it was missing
	keySeen, caSeen os.FileInfo // Key and CA likewise
	certErr, caErr  error       // why the files as last read did not load
}

// loaded is what the Reloader last loaded. A new one replaces it whole.
type loaded struct {
	cert *tls.Certificate // nil when Files.Cert is empty
	pool *x509.CertPool   // nil when Files.CA is empty
}

// handshakeConfig is the configuration a server's handshakes get while
// from is in use (see ServerConfig).
type handshakeConfig struct {
	from *loaded
	cfg  *tls.Config
}

// LoadError is New's error for a file that did not load, naming the file
// and what is wrong with it; CA tells a CA's from the certificate's or
// its key's (a command names the flag of the file).
type LoadError struct {
	CA  bool
	Err error
}

func (e *LoadError) Error() string { return "tlsfiles: " + e.Err.Error() }

// Unwrap returns the cause (an *fs.PathError for a missing file, say).
func (e *LoadError) Unwrap() error { return e.Err }

// New reads and checks every file c names and returns a Reloader holding
// them. An error names the file and what is wrong with it.
func New(c Config) (*Reloader, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	r := &Reloader{files: c.Files, interval: c.ReloadInterval, clock: c.Clock, logger: c.Logger}
	switch {
	case c.NoReload:
		r.interval = -1
	case r.interval == 0:
		r.interval = DefaultReloadInterval
	}
	if r.clock == nil {
		r.clock = clock.Real
	}
	l := &loaded{}
	if c.Files.Cert != "" {
		r.certSeen, r.keySeen = stat(c.Files.Cert), stat(c.Files.Key)
		cert, err := c.Files.keyPair()
		if err != nil {
			return nil, &LoadError{Err: err}
		}
		l.cert = cert
	}
	if c.Files.CA != "" {
		r.caSeen = stat(c.Files.CA)
		pool, err := loadPool(c.Files.CA)
		if err != nil {
			return nil, &LoadError{CA: true, Err: err}
		}
		l.pool = pool
	}
	r.cur.Store(l)
	r.next = r.clock.Now().Add(r.interval)
	return r, nil
}

// ServerConfig returns the TLS configuration of a server presenting the
// current certificate and, when Files.CA is set, requiring a client
// certificate that chains to the current CA. Make it once: the one
// configuration follows the files for every later handshake. It is an
// error when Files.Cert is empty.
//
// The configuration holds MinVersion (TLS 1.2) and GetConfigForClient.
// GetConfigForClient hands each handshake a clone of this configuration
// for the certificate and CA in use, made at the first handshake after
// they were loaded and shared by the handshakes until the next load:
// Certificates holds the certificate and, with a CA, ClientCAs holds the
// CA and ClientAuth is tls.RequireAndVerifyClientCert. So crypto/tls
// verifies client certificates itself, against the CA in use at the
// handshake: the chain, the validity dates, the client-authentication
// key usage; it sends the alert that says why a certificate was refused,
// and the ConnectionState's VerifiedChains hold the verified chains (see
// IdentityOf).
//
// The other fields set on the returned configuration before its first
// handshake (MinVersion, MaxVersion, CipherSuites, NextProtos,
// VerifyConnection, and ClientAuth and ClientCAs when Files.CA is empty)
// hold for every handshake, as crypto/tls wants a configuration left
// alone once in use; fields changed after it are ignored. Set them on
// the returned configuration itself: a clone's GetConfigForClient is
// this one's, which reads them from the returned configuration, not the
// clone. Certificates and GetCertificate are the files'.
// Do not replace GetConfigForClient: the configuration has no
// certificate of its own, so every handshake would fail. A wrapper (gRPC's
// credentials add their ALPN protocol so) calls the one returned and
// sets fields on a clone of what it returns, which is shared.
func (r *Reloader) ServerConfig() (*tls.Config, error) {
	if r.files.Cert == "" {
		return nil, errNoServerCert
	}
	outer := &tls.Config{MinVersion: tls.VersionTLS12}
	var (
		made atomic.Pointer[handshakeConfig]
		// base is outer as it was at the first handshake, which every
		// load's configuration is made from: fields changed later are
		// ignored, not applied at the next certificate rotation.
		base = sync.OnceValue(func() *tls.Config {
			b := outer.Clone()
			b.GetConfigForClient, b.GetCertificate = nil, nil
			return b
		})
	)
	outer.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		l := r.current()
		if h := made.Load(); h != nil && h.from == l {
			return h.cfg, nil
		}
		c := base().Clone()
		c.Certificates = []tls.Certificate{*l.cert}
		if l.pool != nil {
			c.ClientCAs, c.ClientAuth = l.pool, tls.RequireAndVerifyClientCert
		}
		made.Store(&handshakeConfig{from: l, cfg: c})
		return c, nil
	}
	return outer, nil
}

// ClientConfig returns the TLS configuration of a client verifying the
// server against the CA as it is now (the system's roots when Files.CA is
// empty) and presenting the current certificate when Files.Cert is set,
// through GetClientCertificate, for the configuration's whole life.
// serverName, when not empty, is the name the server's certificate must
// carry instead of the host the client dials; an IP address is checked
// against the certificate's IP addresses.
//
// crypto/tls verifies the server, unchanged. The CA is read into the
// configuration when it is made: to have a CA replaced on disk take
// effect, call ClientConfig for each connection dialled (it reads no file
// unless the interval is over and a file changed). The package comment
// says why.
func (r *Reloader) ClientConfig(serverName string) *tls.Config {
	c := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12, RootCAs: r.current().pool}
	if r.files.Cert != "" {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return r.current().cert, nil
		}
	}
	return c
}

// Reload reads every file now, changed or not, and installs what loads,
// as a look from a handshake would; the interval starts again. It returns
// why a file did not load (the last good one stays in use), or nil.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	r.next = r.clock.Now().Add(r.interval)
	errs := r.lookLocked(true)
	r.mu.Unlock()
	r.report(errs)
	return errors.Join(errs...)
}

// LastError returns why the files as last read did not load, or nil when
// the files in use are those on disk (as of the last look). It is set
// when a changed file fails to load and cleared when that file next
// loads.
func (r *Reloader) LastError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.certErr, r.caErr)
}

// current returns what is loaded, first looking at the files if the
// interval is over and no other handshake is looking.
func (r *Reloader) current() *loaded {
	if r.interval > 0 && r.mu.TryLock() {
		var errs []error
		if now := r.clock.Now(); !now.Before(r.next) {
			r.next = now.Add(r.interval)
			errs = r.lookLocked(false)
		}
		r.mu.Unlock()
		r.report(errs)
	}
	return r.cur.Load()
}

// lookLocked reads the files that changed since last read (all of them
// when force is set), installs what loads, and records and returns why
// the rest did not, for the caller to report once it has released mu
// (so that a handler may call LastError).
func (r *Reloader) lookLocked(force bool) []error {
	var errs []error
	f := r.files
	if f.Cert != "" {
		// Stat before reading: a change after the stat is seen by the
		// next look.
		c, k := stat(f.Cert), stat(f.Key)
		if force || !same(c, r.certSeen) || !same(k, r.keySeen) {
			r.certSeen, r.keySeen = c, k
			cert, err := f.keyPair()
			if err == nil {
				// On the wall clock, as crypto/tls checks certificates.
				err = checkExpired(cert, f.Cert, time.Now())
			}
			if err != nil {
				r.certErr = fmt.Errorf("tlsfiles: still presenting the certificate loaded before: %w", err)
				errs = append(errs, r.certErr)
			} else {
				r.certErr = nil
				r.install(func(l *loaded) { l.cert = cert })
			}
		}
	}
	if f.CA != "" {
		c := stat(f.CA)
		if force || !same(c, r.caSeen) {
			r.caSeen = c
			pool, err := loadPool(f.CA)
			if err != nil {
				r.caErr = fmt.Errorf("tlsfiles: still trusting the CA loaded before: %w", err)
				errs = append(errs, r.caErr)
			} else {
				r.caErr = nil
				r.install(func(l *loaded) { l.pool = pool })
			}
		}
	}
	return errs
}

// report logs errs at Warn.
func (r *Reloader) report(errs []error) {
	l := r.logger
	if l == nil && len(errs) > 0 {
		l = slog.Default()
	}
	for _, err := range errs {
		l.Warn("tlsfiles: a changed file did not load; the last good one stays in use", "error", err)
	}
}

// install replaces what is loaded by a copy edit changed. The caller
// holds mu.
func (r *Reloader) install(edit func(*loaded)) {
	l := *r.cur.Load()
	edit(&l)
	r.cur.Store(&l)
}

// stat returns file's FileInfo, or nil when it cannot be had (the file is
// missing, say): a file that goes missing has changed, and one that stays
// missing has not.
func stat(file string) os.FileInfo {
	fi, err := os.Stat(file)
	if err != nil {
		return nil
	}
	return fi
}

// same reports whether a and b describe the same file in the same state:
// the same file (device and inode: a file renamed over another is a new
// one), modification time and size.
func same(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}
