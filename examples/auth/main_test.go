package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Over TLS only the allowed identity is served: another certificate is
// refused BAD_REQUEST by the server's middleware, and a client without a
// certificate is refused in the TLS handshake. On the same port, a
// plaintext call with the token is served and one without is refused.
// Refused calls never reach the handler.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, []string{"-certs", "certs"}, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	want := regexp.MustCompile(`^server: greeter on 127\.0\.0\.1:\d+, TLS callers must be spiffe://sluice\.test/client, plaintext ones send the auth-token header
TLS as spiffe://sluice\.test/client: hello, alice \(from spiffe://sluice\.test/client\)
TLS as spiffe://sluice\.test/reporting: BAD_REQUEST: spiffe://sluice\.test/reporting may not call greeter
TLS without a certificate: UNAVAILABLE: refused in the TLS handshake: remote error: tls: certificate required
plaintext with the token: hello, alice \(from a plaintext caller\)
plaintext without the token: BAD_REQUEST: missing or wrong auth-token header
server: 2 calls served, 2 refused
$`)
	if !want.MatchString(out.String()) {
		t.Errorf("output = %q, want a match for %q", out.String(), want)
	}
}

func TestRunRejectsArguments(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"extra"}, &out)
	if want := `auth takes no arguments, got ["extra"]`; err == nil || err.Error() != want {
		t.Errorf("run error = %v, want %q", err, want)
	}
}

// Without its certificates the example says which file it could not read.
func TestRunNamesAMissingFile(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-certs", t.TempDir()}, &out)
	if err == nil || !strings.Contains(err.Error(), "server.pem") {
		t.Errorf("run error = %v, want one naming server.pem", err)
	}
}
