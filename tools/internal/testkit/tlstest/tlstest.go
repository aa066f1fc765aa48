// Package tlstest makes the certificates of TLS tests: a CA, a server
// certificate for 127.0.0.1 and localhost, a client certificate, and a
// second CA that signed neither, written as PEM files in a test's
// temporary directory.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are the PEM files New writes.
type Files struct {
	// CA signed the server's and the client's certificates.
	CA string
	// ServerCert and ServerKey are valid for 127.0.0.1, ::1 and localhost.
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client certificate CA signed.
	ClientCert, ClientKey string
	// OtherCA is a CA that signed nothing here: a peer verifying against
	// it trusts neither certificate.
	OtherCA string
	// OtherKey is a key that belongs to no certificate here.
	OtherKey string
}

type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// New writes a fresh set of certificates in t.TempDir. They are valid
// from an hour ago for a day.
func New(t testing.TB) Files {
	t.Helper()
	dir := t.TempDir()
	ca := newCA(t, "tlstest CA")
	other := newCA(t, "tlstest other CA")
	f := Files{
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey:  filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey:  filepath.Join(dir, "client-key.pem"),
		OtherCA:    filepath.Join(dir, "other-ca.pem"),
		OtherKey:   filepath.Join(dir, "other-key.pem"),
	}
	writeCert(t, f.CA, ca.cert.Raw)
	writeCert(t, f.OtherCA, other.cert.Raw)
	writeKey(t, f.OtherKey, other.key)

	srv := leaf(t, ca, "tlstest server", x509.ExtKeyUsageServerAuth, func(c *x509.Certificate) {
		c.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		c.DNSNames = []string{"localhost"}
	})
	writeCert(t, f.ServerCert, srv.cert.Raw)
	writeKey(t, f.ServerKey, srv.key)
	cl := leaf(t, ca, "tlstest client", x509.ExtKeyUsageClientAuth, nil)
	writeCert(t, f.ClientCert, cl.cert.Raw)
	writeKey(t, f.ClientKey, cl.key)
	return f
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	return k
}

func template(name string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
	}
}

func newCA(t testing.TB, name string) issuer {
	t.Helper()
	key := newKey(t)
	tmpl := template(name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	return issuer{cert, key}
}

func leaf(t testing.TB, ca issuer, name string, usage x509.ExtKeyUsage, edit func(*x509.Certificate)) issuer {
	t.Helper()
	key := newKey(t)
	tmpl := template(name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	if edit != nil {
		edit(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	return issuer{cert, key}
}

func writeCert(t testing.TB, file string, der []byte) {
	t.Helper()
	write(t, file, &pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func writeKey(t testing.TB, file string, key *ecdsa.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	write(t, file, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func write(t testing.TB, file string, b *pem.Block) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(b), 0o600); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
}
