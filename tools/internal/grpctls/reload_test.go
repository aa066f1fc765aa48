package grpctls_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/tlsfiles"
)

// Certificates rotated on disk are used by the connections made after,
// without a restart: the server presents the new certificate, and the
// client's credentials verify it against the new CA. A connection made
// before keeps working.
func TestRotation(t *testing.T) {
	oldCerts, newCerts := testcerts.New(t), testcerts.New(t) // two unrelated CAs
	dir := t.TempDir()
	live := tlsfiles.Files{Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem")}
	ca := filepath.Join(dir, "ca.pem")
	oldCerts.Server.WriteTo(t, live.Cert, live.Key)
	oldCerts.CA.WriteTo(t, ca)

	addr := serveTLS(t, serverCreds(t, live))
	client := clientCreds(t, tlsfiles.Files{CA: ca}, "")
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

	// In place, with later modification times (testcerts.Write).
	newCerts.Server.WriteTo(t, live.Cert, live.Key)
	newCerts.CA.WriteTo(t, ca)
	// The files are looked at once a second at most, by the handshake
	// that finds the second over: poll with new connections until the
	// server presents the new certificate, then until the client's
	// credentials (made before the rotation) trust it.
	trustingNew := clientCreds(t, tlsfiles.Files{CA: newCerts.CA.File}, "")
	testwait.Until(t, "the server to present the new certificate", func() bool { return check(t, addr, trustingNew) == nil })
	testwait.Until(t, "the client to trust the new CA", func() bool { return check(t, addr, client) == nil })
	if _, err := healthpb.NewHealthClient(before).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("the connection made before the rotation: %v", err)
	}
	if err := check(t, addr, clientCreds(t, tlsfiles.Files{CA: oldCerts.CA.File}, "")); err == nil {
		t.Error("a client trusting the old CA only was served after the rotation")
	}
}
