package grpctls_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluice-rpc/sluice/tools/internal/grpctls"
	"github.com/sluice-rpc/sluice/tools/internal/testkit/tlstest"
)

// copyFile writes src's content over dst, in place, and moves dst's
// modification time past its old one (file systems with coarse clocks
// would otherwise show no change).
func copyFile(t *testing.T, dst, src string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	before, statErr := os.Stat(dst)
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if statErr == nil {
		later := before.ModTime().Add(time.Second)
		if err := os.Chtimes(dst, later, later); err != nil {
			t.Fatal(err)
		}
	}
}

// Certificates rotated on disk are used by the connections made after,
// without a restart: the server presents the new certificate, and the
// client's credentials verify it against the new CA. A connection made
// before keeps working.
func TestRotation(t *testing.T) {
	oldCerts, newCerts := tlstest.New(t), tlstest.New(t) // two unrelated CAs
	dir := t.TempDir()
	live := grpctls.Files{Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem")}
	ca := filepath.Join(dir, "ca.pem")
	copyFile(t, live.Cert, oldCerts.ServerCert)
	copyFile(t, live.Key, oldCerts.ServerKey)
	copyFile(t, ca, oldCerts.CA)

	addr := serveTLS(t, serverCreds(t, live))
	client := clientCreds(t, grpctls.Files{CA: ca}, "")
	before, err := grpc.NewClient(addr, grpc.WithTransportCredentials(client))
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(before).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}

	copyFile(t, live.Cert, newCerts.ServerCert)
	copyFile(t, live.Key, newCerts.ServerKey)
	copyFile(t, ca, newCerts.CA)
	// The files are looked at once a second at most, by the handshake
	// that finds the second over: poll with new connections until the
	// server presents the new certificate, then until the client's
	// credentials (made before the rotation) trust it.
	poll := func(what string, creds func() credentials.TransportCredentials) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for check(t, addr, creds()) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("waited 30s for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	poll("the server to present the new certificate", func() credentials.TransportCredentials {
		return clientCreds(t, grpctls.Files{CA: newCerts.CA}, "")
	})
	poll("the client to trust the new CA", func() credentials.TransportCredentials { return client })
	if _, err := healthpb.NewHealthClient(before).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("the connection made before the rotation: %v", err)
	}
	if err := check(t, addr, clientCreds(t, grpctls.Files{CA: oldCerts.CA}, "")); err == nil {
		t.Error("a client trusting the old CA only was served after the rotation")
	}
}
