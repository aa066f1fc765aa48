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
// The caller reads the files with tlsfiles.New (a bad file is an error
// then, naming the file, which tlsfiles.LoadError tells apart); the
// credentials follow them as they change:
// a rotated certificate, key or CA is used for the connections made
// after it, within a second, without a restart; connections already made
// keep theirs. A changed file that does not load (half written, a
// certificate beside the old key) leaves the last good one in use.
package grpctls

import (
	"context"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/sluice-rpc/sluice/tlsfiles"
)

// ClientCredentials returns gRPC credentials for a client verifying the
// server against the CA r holds (the system's roots when its Files name
// none) and presenting r's certificate when its Files name one.
// serverName, when not empty, is the name the server's certificate must
// carry instead of the host the client dials (the original's server host
// override); an IP address is checked against the certificate's IP
// addresses. Each handshake takes a configuration made afresh from r, so
// that a CA replaced on disk is trusted by the connections made after.
func ClientCredentials(r *tlsfiles.Reloader, serverName string) credentials.TransportCredentials {
	return &clientCredentials{r: r, serverName: serverName}
}

// ServerCredentials returns gRPC credentials for a server presenting r's
// certificate and, when r's Files name a CA, requiring client
// certificates it signed; an error when r holds no certificate.
func ServerCredentials(r *tlsfiles.Reloader) (credentials.TransportCredentials, error) {
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
