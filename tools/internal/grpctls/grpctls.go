// Package grpctls wraps the certificate, key and CA files a
// tlsfiles.Reloader holds as gRPC transport credentials, for a Doorman
// server and its clients (--tls-cert, --tls-key, --tls-ca). Connections
// made after a file rotates use the new one; a changed file that does not
// load leaves the last good one in use.
package grpctls

import (
	"context"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/sluice-rpc/sluice/tlsfiles"
)

// ClientCredentials returns gRPC credentials for a client verifying the
// server against r's CA (the system's roots when none) and presenting r's
// certificate if any; serverName, if set, is the name the server's
// certificate must carry instead of the dialled host. Each handshake
// takes a configuration made afresh from r.
func ClientCredentials(r *tlsfiles.Reloader, serverName string) credentials.TransportCredentials {
	return &clientCredentials{r: r, serverName: serverName}
}

// ServerCredentials returns gRPC credentials for a server presenting r's
// certificate and, with a CA, requiring client certificates it signed.
func ServerCredentials(r *tlsfiles.Reloader) (credentials.TransportCredentials, error) {
	c, err := r.ServerConfig()
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(c), nil
}

// clientCredentials make gRPC's TLS credentials afresh per handshake.
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
