// Package grpctls turns certificate, key and CA files into gRPC transport
// credentials, for a server and for its clients: the capability of the
// original Doorman's -tls, -cert_file, -key_file and -ca_file flags,
// behind Sluice's --tls-cert, --tls-key and --tls-ca.
//
// It is a thin layer over the library's package tlsfiles, the TLS helper
// the TChannel channel uses too: tlsfiles reads the files and makes the
// tls.Config, grpctls wraps it as gRPC credentials. A server presents
// Cert (with Key); with CA set it also requires every client to present a
// certificate CA signed (mutual TLS). A client verifies the server against
// CA (the system's roots when CA is empty) and, with Cert and Key set,
// presents them. Both sides speak TLS 1.2 or later.
//
// The files are read and checked when the credentials are made (a bad
// file is an error then, naming the file), and re-read when they change:
// a rotated certificate, key or CA is used for the connections made
// after it, within a second, without a restart; connections already made
// keep theirs. A changed file that does not load (half written, a
// certificate beside the old key) leaves the last good one in use.
package grpctls

import (
	"context"
	"crypto/tls"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/sluice-rpc/sluice/tlsfiles"
)

// Files names the PEM files of one side of a TLS connection. The zero
// value is plaintext (see Enabled). It is tlsfiles.Files with gRPC
// credentials besides.
type Files struct {
	// Cert is a PEM file holding the certificate to present, followed by
	// its intermediates. Required for a server; optional for a client
	// (with Key), which then presents it.
	Cert string
	// Key is a PEM file holding Cert's private key. Set exactly when Cert
	// is.
	Key string
	// CA is a PEM file holding the certificates that verify the peer. For
	// a server: set, clients must present a certificate one of them signed;
	// empty, clients present none. For a client: the server's certificate
	// must chain to one of them; empty means the system's roots.
	CA string
}

func (f Files) lib() tlsfiles.Files { return tlsfiles.Files(f) }

// Enabled reports whether any file is named: a side with no files speaks
// plaintext (a client may still ask for TLS with the system's roots, see
// ClientCredentials).
func (f Files) Enabled() bool { return f.lib().Enabled() }

// Validate reports the first thing wrong with f as a set: a certificate
// without its key or a key without its certificate. It reads no file.
func (f Files) Validate() error { return f.lib().Validate() }

// ServerConfig returns the TLS configuration of a server presenting Cert,
// requiring client certificates signed by CA when CA is set; it follows
// the files (tlsfiles.Files.ServerConfig).
func (f Files) ServerConfig() (*tls.Config, error) { return f.lib().ServerConfig() }

// ServerCredentials returns ServerConfig as gRPC credentials, for
// grpc.Creds. The one configuration follows the files for every
// connection.
func (f Files) ServerCredentials() (credentials.TransportCredentials, error) {
	c, err := f.ServerConfig()
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(c), nil
}

// ClientConfig returns the TLS configuration of a client verifying the
// server against CA (the system's roots when empty) and presenting Cert
// when set. serverName, when not empty, is the name the server's
// certificate must carry instead of the host the client dials (the
// original's server host override); an IP address is checked against the
// certificate's IP addresses. The certificate presented follows the
// files; the CA is the one read now (tlsfiles.Reloader.ClientConfig says
// why; ClientCredentials follows it too).
func (f Files) ClientConfig(serverName string) (*tls.Config, error) {
	return f.lib().ClientConfig(serverName)
}

// ClientCredentials returns gRPC credentials for ClientConfig, for
// grpc.WithTransportCredentials (leasing.ClientConfig.DialOptions). Each
// connection gRPC dials gets a configuration made for it, so that a
// replaced CA takes effect as a replaced certificate does.
func (f Files) ClientCredentials(serverName string) (credentials.TransportCredentials, error) {
	r, err := tlsfiles.New(tlsfiles.Config{Files: f.lib()})
	if err != nil {
		return nil, err
	}
	return ClientCredentialsFrom(r, serverName), nil
}

// ClientCredentialsFrom returns ClientCredentials's credentials for the
// files r holds, for a caller that made r itself (to report reload
// errors, or to name the flag of a file that did not load).
func ClientCredentialsFrom(r *tlsfiles.Reloader, serverName string) credentials.TransportCredentials {
	return &clientCredentials{r: r, serverName: serverName}
}

// ServerCredentialsFrom returns ServerCredentials's credentials for the
// files r holds; an error when r holds no certificate.
func ServerCredentialsFrom(r *tlsfiles.Reloader) (credentials.TransportCredentials, error) {
	c, err := r.ServerConfig()
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(c), nil
}

// clientCredentials are gRPC's TLS credentials on a configuration
// tlsfiles makes afresh for each handshake.
type clientCredentials struct {
	r          *tlsfiles.Reloader
	serverName string
}

func (c *clientCredentials) tls() credentials.TransportCredentials {
	return credentials.NewTLS(c.r.ClientConfig(c.serverName))
}

func (c *clientCredentials) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.tls().ClientHandshake(ctx, authority, raw)
}

func (c *clientCredentials) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("grpctls: client credentials serve no connection: use ServerCredentials")
}

func (c *clientCredentials) Info() credentials.ProtocolInfo { return c.tls().Info() }

func (c *clientCredentials) Clone() credentials.TransportCredentials {
	cc := *c
	return &cc
}

// OverrideServerName is gRPC's deprecated way of setting serverName.
func (c *clientCredentials) OverrideServerName(name string) error {
	c.serverName = name
	return nil
}
