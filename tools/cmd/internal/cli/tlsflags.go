package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/tlsfiles"
)

// serverTLSHelp is the paragraph of sluice serve's help about TLS.
const serverTLSHelp = `With --tls-cert and --tls-key it serves TLS, and with --tls-ca it also
requires client certificates that CA signed (mutual TLS). --tls-mode mixed
serves TLS and plaintext on the one port, for a rollout; the default,
--tls-mode only, refuses plaintext clients. The files are re-read when they
change; a file that does not load leaves the last good one in use, with a
line on stderr (docs/tls.md).`

// clientTLSHelp is the paragraph of call's and bench's help about TLS.
const clientTLSHelp = `TLS: --tls speaks TLS to the peers, verified against the system's roots or,
with --tls-ca FILE, that CA; --tls-cert and --tls-key present a client
certificate (mutual TLS); --tls-server-name is the name the peers'
certificates must carry when it is not their host. The files are re-read
when they change. --tls-fallback reaches a peer that answers in plaintext
in plaintext, for a rollout: a downgrade anyone on the path can force
(docs/tls.md).`

// ServerTLSFlags are a server's TLS flags: --tls-cert, --tls-key and
// --tls-ca.
type ServerTLSFlags struct {
	files tlsfiles.Files
}

// Register registers the flags on fs, landing in s; protocol is what the
// server serves ("gRPC", "TChannel").
func (s *ServerTLSFlags) Register(fs *FlagSet, protocol string) {
	fs.StringVar(&s.files.Cert, "tls-cert", "", "serve "+protocol+" over TLS with the PEM certificate (and chain) in `FILE`, re-read when it changes; needs --tls-key")
	fs.StringVar(&s.files.Key, "tls-key", "", "the PEM private key of --tls-cert, in `FILE`")
	fs.StringVar(&s.files.CA, "tls-ca", "", "require clients to present a certificate signed by a CA in the PEM `FILE` (mutual TLS); needs --tls-cert")
}

// enabled reports whether the server serves TLS.
func (s *ServerTLSFlags) enabled() bool { return s.files.Cert != "" }

// validate checks the flags as a set; it reads no file. Its errors are
// usage errors.
func (s *ServerTLSFlags) validate() error {
	if s.files.CA != "" && s.files.Cert == "" && s.files.Key == "" {
		return errors.New("--tls-ca (client certificates) needs --tls-cert and --tls-key: mutual TLS is TLS first")
	}
	return checkPair(s.files, "--")
}

// checkPair checks that the certificate and key flags (after p) come
// together.
func checkPair(f tlsfiles.Files, p string) error {
	switch {
	case f.Cert != "" && f.Key == "":
		return fmt.Errorf("%stls-cert needs %stls-key, the PEM file of its private key", p, p)
	case f.Key != "" && f.Cert == "":
		return fmt.Errorf("%stls-key needs %stls-cert, the PEM file of its certificate", p, p)
	}
	return nil
}

// ClientTLSFlags are a client's TLS flags: --tls, --tls-ca, --tls-cert,
// --tls-key and --tls-server-name, each name after prefix ("parent-":
// --parent-tls-ca, ...), and a TChannel client's --tls-fallback.
type ClientTLSFlags struct {
	prefix     string
	on         bool
	files      tlsfiles.Files
	serverName string
	fallback   bool
}

// AddClientTLSFlags registers a client's TLS flags, named prefix+"tls...",
// for its connections to peer, whose address addrFlag gives.
func AddClientTLSFlags(fs *FlagSet, prefix, peer, addrFlag string) *ClientTLSFlags {
	c := &ClientTLSFlags{prefix: prefix}
	fs.BoolVar(&c.on, prefix+"tls", false, "speak TLS to "+peer+", verified against the system's roots (or --"+prefix+"tls-ca)")
	fs.StringVar(&c.files.CA, prefix+"tls-ca", "", "speak TLS to "+peer+", verified against the CA certificates in the PEM `FILE`")
	fs.StringVar(&c.files.Cert, prefix+"tls-cert", "", "speak TLS to "+peer+", presenting the PEM client certificate in `FILE` (for a server requiring one); needs --"+prefix+"tls-key")
	fs.StringVar(&c.files.Key, prefix+"tls-key", "", "the PEM private key of --"+prefix+"tls-cert, in `FILE`")
	fs.StringVar(&c.serverName, prefix+"tls-server-name", "", "the `NAME` the certificate of "+peer+" must carry, if not the host of "+addrFlag+"; with --"+prefix+"tls or --"+prefix+"tls-ca")
	return c
}

// enabled reports whether the client speaks TLS: --tls, or a file.
func (c *ClientTLSFlags) enabled() bool { return c.on || c.files.Enabled() }

// validate checks the flags as a set; it reads no file. Its errors are
// usage errors.
func (c *ClientTLSFlags) validate() error {
	p := "--" + c.prefix
	if c.serverName != "" && !c.enabled() {
		return fmt.Errorf("%stls-server-name is the name a TLS server's certificate must carry: give %stls or %stls-ca too", p, p, p)
	}
	return checkPair(c.files, p)
}

// loadTLSFiles reads f's files into a tlsfiles.Reloader, which tells
// onReloadError (nil: nobody) of a changed file that did not load. An
// error names the flag and the file.
func loadTLSFiles(f tlsfiles.Files, prefix string, onReloadError func(error)) (*tlsfiles.Reloader, error) {
	r, err := tlsfiles.New(tlsfiles.Config{Files: f, Logger: slog.New(errorHandler(onReloadError))})
	if err != nil {
		flags := "--" + prefix + "tls-cert/--" + prefix + "tls-key"
		if le := (*tlsfiles.LoadError)(nil); errors.As(err, &le) && le.CA {
			flags = "--" + prefix + "tls-ca"
		}
		return nil, fmt.Errorf("%s: %v", flags, err)
	}
	return r, nil
}

// errorHandler is a slog.Handler that hands the error of each record
// (its attribute error: tlsfiles' lines have one) to itself; nil drops them.
type errorHandler func(error)

func (h errorHandler) Enabled(context.Context, slog.Level) bool { return h != nil }
func (h errorHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h errorHandler) WithGroup(string) slog.Handler            { return h }
func (h errorHandler) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "error" {
			h(err)
		}
		return true
	})
	return nil
}

// TLSReloadErrors writes a line on f's stderr for each changed TLS file
// that did not load. Handshakes call it: stderr must be Locked.
func (f *FlagSet) TLSReloadErrors() func(error) {
	return func(err error) {
		fmt.Fprintf(f.stderr, "%s: a changed TLS file did not load: %v\n", f.Name(), err)
	}
}

// addChannelClientTLSFlags adds the TLS flags of a TChannel client (call,
// bench), --tls-fallback among them.
func addChannelClientTLSFlags(fs *FlagSet) *ClientTLSFlags {
	c := AddClientTLSFlags(fs, "", "the peers", "-p/-P")
	fs.BoolVar(&c.fallback, "tls-fallback", false, "reach a peer in plaintext when it answers the TLS handshake in plaintext or not at all, for a rollout; a downgrade anyone on the path can force; with --tls or --tls-ca")
	return c
}

// options checks the flags and reads the files, and returns the Channel
// options that make its connections speak TLS: nil for plaintext. With
// --tls-fallback, the first fallback to each peer is logged on the
// Channel's logger (channel.WithLogger). Its errors are usage errors.
func (c *ClientTLSFlags) options(onReloadError func(error)) ([]channel.Option, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.fallback && !c.enabled() {
		return nil, errors.New("--tls-fallback lets TLS fall back to plaintext: give --tls or --tls-ca too")
	}
	r, _, err := c.Reloader(onReloadError)
	if r == nil || err != nil {
		return nil, err
	}
	ct := channel.ClientTLS{
		// A configuration per connection: a replaced CA takes effect
		// for the next connect, as a replaced certificate does.
		Config:     func() *tls.Config { return r.ClientConfig("") },
		ServerName: c.serverName,
	}
	if c.fallback { // every peer of the command's target
		ct.Fallback = func(string) bool { return true }
	}
	return []channel.Option{channel.WithClientTLS(ct)}, nil
}

// Reloader checks the flags and reads their files: nil and "" when the
// client speaks plaintext, else the files and the name the server's
// certificate must carry ("": the dialled host's). Errors are usage
// errors; onReloadError is as loadTLSFiles'.
func (c *ClientTLSFlags) Reloader(onReloadError func(error)) (*tlsfiles.Reloader, string, error) {
	if err := c.validate(); err != nil || !c.enabled() {
		return nil, "", err
	}
	r, err := loadTLSFiles(c.files, c.prefix, onReloadError)
	return r, c.serverName, err
}

// Reloader checks the flags and reads their files: nil without TLS. As
// ClientTLSFlags.Reloader.
func (s *ServerTLSFlags) Reloader(onReloadError func(error)) (*tlsfiles.Reloader, error) {
	if err := s.validate(); err != nil || !s.enabled() {
		return nil, err
	}
	return loadTLSFiles(s.files, "", onReloadError)
}
