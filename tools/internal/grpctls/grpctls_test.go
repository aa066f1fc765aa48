package grpctls_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
	"github.com/sluice-rpc/sluice/tlsfiles"
	"github.com/sluice-rpc/sluice/tools/internal/grpctls"
)

// serveTLS serves gRPC's health service with creds on 127.0.0.1 until the
// test ends and returns its address.
func serveTLS(t *testing.T, creds credentials.TransportCredentials) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(creds))
	healthpb.RegisterHealthServer(g, health.NewServer())
	done := make(chan struct{})
	go func() { defer close(done); g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); <-done })
	return lis.Addr().String()
}

// check makes one health check to addr with creds, and returns its error.
func check(t *testing.T, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// serverCredsOf reads f and makes a server's credentials of it.
func serverCredsOf(f tlsfiles.Files) (credentials.TransportCredentials, error) {
	r, err := tlsfiles.New(tlsfiles.Config{Files: f})
	if err != nil {
		return nil, err
	}
	return grpctls.ServerCredentials(r)
}

// clientCredsOf reads f and makes a client's credentials of it.
func clientCredsOf(f tlsfiles.Files, serverName string) (credentials.TransportCredentials, error) {
	r, err := tlsfiles.New(tlsfiles.Config{Files: f})
	if err != nil {
		return nil, err
	}
	return grpctls.ClientCredentials(r, serverName), nil
}

func serverCreds(t *testing.T, f tlsfiles.Files) credentials.TransportCredentials {
	t.Helper()
	c, err := serverCredsOf(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func clientCreds(t *testing.T, f tlsfiles.Files, serverName string) credentials.TransportCredentials {
	t.Helper()
	c, err := clientCredsOf(f, serverName)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A real handshake on 127.0.0.1: a client trusting the CA that signed the
// server's certificate gets its answer; one trusting another CA, or the
// system's roots, or expecting another name, or speaking plaintext, is
// refused before any request.
func TestServerTLS(t *testing.T) {
	c := testcerts.New(t)
	addr := serveTLS(t, serverCreds(t, tlsfiles.Files{Cert: c.Server.Cert, Key: c.Server.Key}))

	if err := check(t, addr, clientCreds(t, tlsfiles.Files{CA: c.CA.File}, "")); err != nil {
		t.Fatalf("a client trusting the CA: %v", err)
	}
	// The certificate names localhost too.
	_, port, _ := net.SplitHostPort(addr)
	if err := check(t, "localhost:"+port, clientCreds(t, tlsfiles.Files{CA: c.CA.File}, "")); err != nil {
		t.Fatalf("a client dialling localhost: %v", err)
	}
	for _, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
		want  string
	}{
		{"another CA", clientCreds(t, tlsfiles.Files{CA: c.Untrusted.File}, ""), "certificate signed by unknown authority"},
		{"the system's roots", clientCreds(t, tlsfiles.Files{}, ""), "certificate"},
		{"another server name", clientCreds(t, tlsfiles.Files{CA: c.CA.File}, "doorman.example"), "doorman.example"},
		{"plaintext", insecure.NewCredentials(), "Unavailable"},
	} {
		if err := check(t, addr, tc.creds); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("a client with %s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// With a CA, the server requires client certificates it signed.
func TestMutualTLS(t *testing.T) {
	c := testcerts.New(t)
	addr := serveTLS(t, serverCreds(t, tlsfiles.Files{Cert: c.Server.Cert, Key: c.Server.Key, CA: c.CA.File}))

	if err := check(t, addr, clientCreds(t, tlsfiles.Files{CA: c.CA.File, Cert: c.Client.Cert, Key: c.Client.Key}, "")); err != nil {
		t.Fatalf("a client presenting a certificate the CA signed: %v", err)
	}
	if err := check(t, addr, clientCreds(t, tlsfiles.Files{CA: c.CA.File}, "")); err == nil {
		t.Error("a client presenting no certificate was served")
	}
	// The server's own certificate is not a client certificate (its
	// extended key usage is server auth only).
	if err := check(t, addr, clientCreds(t, tlsfiles.Files{CA: c.CA.File, Cert: c.Server.Cert, Key: c.Server.Key}, "")); err == nil {
		t.Error("a client presenting a server-only certificate was served")
	}
}

// Bad files are refused when the credentials are made, each error naming
// the file and what is wrong with it.
func TestBadFiles(t *testing.T) {
	c := testcerts.New(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("not PEM at all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		f      tlsfiles.Files
		server bool
		want   string
	}{
		{"no certificate", tlsfiles.Files{}, true, "a TLS server needs a certificate and its key"},
		{"a CA only", tlsfiles.Files{CA: c.CA.File}, true, "a TLS server needs a certificate and its key"},
		{"certificate without key", tlsfiles.Files{Cert: c.Server.Cert}, true, `Files.Key is "", must name the PEM file of the private key of Cert ("` + c.Server.Cert + `")`},
		{"key without certificate", tlsfiles.Files{Key: c.Server.Key}, false, `Files.Cert is "", must name the PEM file of the certificate of Key ("` + c.Server.Key + `")`},
		{"missing certificate", tlsfiles.Files{Cert: missing, Key: c.Server.Key}, true, "reading certificate: open " + missing},
		{"missing key", tlsfiles.Files{Cert: c.Server.Cert, Key: missing}, true, "reading key: open " + missing},
		{"mismatched key", tlsfiles.Files{Cert: c.Server.Cert, Key: c.UntrustedClient.Key}, true, "private key does not match public key"},
		{"client's mismatched key", tlsfiles.Files{Cert: c.Client.Cert, Key: c.Server.Key}, false, "private key does not match public key"},
		{"missing CA", tlsfiles.Files{Cert: c.Server.Cert, Key: c.Server.Key, CA: missing}, true, "reading CA: open " + missing},
		{"client's missing CA", tlsfiles.Files{CA: missing}, false, "reading CA: open " + missing},
		{"CA without certificates", tlsfiles.Files{CA: empty}, false, `CA "` + empty + `" holds no PEM certificate`},
		{"a key as the CA", tlsfiles.Files{CA: c.Server.Key}, false, `block 1 is a "PRIVATE KEY", want only CERTIFICATE blocks`},
	} {
		var err error
		if tc.server {
			_, err = serverCredsOf(tc.f)
		} else {
			_, err = clientCredsOf(tc.f, "")
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
