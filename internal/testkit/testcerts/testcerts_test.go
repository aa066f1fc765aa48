package testcerts_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
)

// Each certificate of a Set verifies, or fails to, as its comment says.
func TestSet(t *testing.T) {
	s := testcerts.New(t)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.CA.PEM)
	untrusted := x509.NewCertPool()
	untrusted.AppendCertsFromPEM(s.Untrusted.PEM)
	server := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	for _, tc := range []struct {
		name    string
		p       testcerts.Pair
		opts    x509.VerifyOptions
		wantErr string
	}{
		{"server for 127.0.0.1", s.Server, x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1", KeyUsages: server}, ""},
		{"server for ::1", s.Server, x509.VerifyOptions{Roots: roots, DNSName: "::1", KeyUsages: server}, ""},
		{"server for localhost", s.Server, x509.VerifyOptions{Roots: roots, DNSName: "localhost", KeyUsages: server}, ""},
		{"server as a client", s.Server, x509.VerifyOptions{Roots: roots, KeyUsages: client}, "incompatible key usage"},
		{"wrong name for localhost", s.WrongName, x509.VerifyOptions{Roots: roots, DNSName: "localhost", KeyUsages: server}, "not localhost"},
		{"wrong name for its name", s.WrongName, x509.VerifyOptions{Roots: roots, DNSName: testcerts.WrongName, KeyUsages: server}, ""},
		{"client", s.Client, x509.VerifyOptions{Roots: roots, KeyUsages: client}, ""},
		{"expired client", s.Expired, x509.VerifyOptions{Roots: roots, KeyUsages: client}, "expired"},
		{"untrusted client", s.UntrustedClient, x509.VerifyOptions{Roots: roots, KeyUsages: client}, "unknown authority"},
		{"untrusted client by its CA", s.UntrustedClient, x509.VerifyOptions{Roots: untrusted, KeyUsages: client}, ""},
		{"untrusted server", s.UntrustedServer, x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1", KeyUsages: server}, "unknown authority"},
	} {
		_, err := tc.p.Leaf.Verify(tc.opts)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %v, want error %q", tc.name, err, tc.wantErr)
		}
		if _, err := tls.LoadX509KeyPair(tc.p.Cert, tc.p.Key); err != nil {
			t.Errorf("%s: the files do not load as a pair: %v", tc.name, err)
		}
	}
	c := s.Client.Leaf
	if c.Subject.CommonName != testcerts.ClientName || len(c.DNSNames) != 1 || c.DNSNames[0] != testcerts.ClientDNS ||
		len(c.URIs) != 1 || c.URIs[0].String() != testcerts.ClientURI {
		t.Errorf("client certificate names %q %q %v, want %q %q %q", c.Subject.CommonName, c.DNSNames, c.URIs, testcerts.ClientName, testcerts.ClientDNS, testcerts.ClientURI)
	}
}

// Write rewrites a file in place and moves its modification time forward
// even when the file system's clock has not.
func TestWriteMovesModTime(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.pem")
	testcerts.Write(t, file, []byte("one"))
	before, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		testcerts.Write(t, file, []byte("two"))
		after, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if !after.ModTime().After(before.ModTime()) {
			t.Fatalf("write %d: modification time %v, not after %v", i, after.ModTime(), before.ModTime())
		}
		if !os.SameFile(before, after) {
			t.Fatalf("write %d: the file was replaced, not rewritten in place", i)
		}
		before = after
	}
	if b, _ := os.ReadFile(file); string(b) != "two" {
		t.Errorf("file holds %q, want %q", b, "two")
	}
}
