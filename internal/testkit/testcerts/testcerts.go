// Package testcerts makes the certificates of the library's TLS tests and
// writes them as PEM files in a test's temporary directory: certificate
// authorities, certificates they issue for servers and clients (for any
// names, valid or expired), and in-place rewrites of those files, so that
// a test can replace a certificate under a running server as an operator
// would.
//
// New makes the usual cast in one call: a CA, a server certificate for
// 127.0.0.1, ::1 and localhost, one for a wrong name, a client certificate
// with DNS and URI (SPIFFE) names, an expired client certificate, and an
// untrusted CA with a client and a server certificate of its own. Keys
// are ECDSA P-256. Every failure fails the test; nothing here returns an
// error.
package testcerts

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/certgen"
)

// The names of the certificates New makes.
const (
	// ClientName is the common name of Set.Client.
	ClientName = "sluice test client"
	// ClientDNS is the DNS name Set.Client carries.
	ClientDNS = "client.sluice.test"
	// ClientURI is the URI (SPIFFE ID) Set.Client carries.
	ClientURI = "spiffe://sluice.test/client"
	// WrongName is the only name Set.WrongName is valid for.
	WrongName = "wrong.sluice.test"
	// organization is the subject's organization of every certificate
	// made here.
	organization = "Sluice tests"
)

// Authority is a certificate authority that issues certificates. Its
// certificate is written to File.
type Authority struct {
	// File is the PEM file of the authority's certificate: what a peer
	// trusting this authority names as its CA.
	File string
	// PEM is File's content.
	PEM []byte
	// Cert is the authority's certificate.
	Cert *x509.Certificate
	ca   certgen.Authority
}

// Leaf describes a certificate for Authority.Issue to make; its
// Organization defaults to "Sluice tests".
type Leaf = certgen.Leaf

// Pair is a certificate and its private key, in memory and in PEM files.
type Pair struct {
	// Cert and Key are the PEM files of the certificate and of its key.
	Cert, Key string
	// CertPEM and KeyPEM are their contents.
	CertPEM, KeyPEM []byte
	// Leaf is the certificate.
	Leaf *x509.Certificate
}

// Set is the certificates New makes.
type Set struct {
	// CA issued Server, WrongName, Client and Expired.
	CA Authority
	// Untrusted is another CA; it issued UntrustedClient and
	// UntrustedServer and nothing else here.
	Untrusted Authority
	// Server is a server certificate for 127.0.0.1, ::1 and localhost.
	Server Pair
	// WrongName is a server certificate for WrongName only.
	WrongName Pair
	// Client is a client certificate for ClientName, with ClientDNS and
	// ClientURI as alternative names.
	Client Pair
	// Expired is a client certificate (for ClientName) that expired an
	// hour ago.
	Expired Pair
	// UntrustedClient is a client certificate Untrusted issued.
	UntrustedClient Pair
	// UntrustedServer is a server certificate for 127.0.0.1, ::1 and
	// localhost that Untrusted issued.
	UntrustedServer Pair
}

// Loopback describes a server certificate named cn for this machine: valid
// for 127.0.0.1, ::1 and localhost.
func Loopback(cn string) Leaf {
	return Leaf{
		CommonName: cn,
		DNSNames:   []string{"localhost"},
		IPs:        []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		Usage:      x509.ExtKeyUsageServerAuth,
	}
}

// New makes a fresh Set in t.TempDir.
func New(t testing.TB) Set {
	t.Helper()
	s := Set{CA: NewCA(t, "sluice test CA"), Untrusted: NewCA(t, "sluice untrusted CA")}
	s.Server = s.CA.Issue(t, Loopback("sluice test server"))
	s.WrongName = s.CA.Issue(t, Leaf{CommonName: WrongName, DNSNames: []string{WrongName}, Usage: x509.ExtKeyUsageServerAuth})
	client := Leaf{
		CommonName: ClientName,
		DNSNames:   []string{ClientDNS},
		URIs:       []string{ClientURI},
		Usage:      x509.ExtKeyUsageClientAuth,
	}
	s.Client = s.CA.Issue(t, client)
	expired := client
	expired.NotBefore, expired.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	s.Expired = s.CA.Issue(t, expired)
	s.UntrustedClient = s.Untrusted.Issue(t, client)
	s.UntrustedServer = s.Untrusted.Issue(t, Loopback("sluice untrusted server"))
	return s
}

// NewCA makes a certificate authority named cn and writes its certificate
// to a file in t.TempDir.
func NewCA(t testing.TB, cn string) Authority {
	t.Helper()
	ca, err := certgen.NewAuthority(Leaf{CommonName: cn, Organization: organization})
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	a := Authority{File: filepath.Join(t.TempDir(), "ca.pem"), PEM: certgen.CertPEM(ca.Cert), Cert: ca.Cert, ca: ca}
	Write(t, a.File, a.PEM)
	return a
}

// Issue makes the certificate l describes, signed by a, with a new key,
// and writes both to files in t.TempDir.
func (a Authority) Issue(t testing.TB, l Leaf) Pair {
	t.Helper()
	if l.Organization == "" {
		l.Organization = organization
	}
	cert, key, err := a.ca.Issue(l)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	keyPEM, err := certgen.KeyPEM(key)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	dir := t.TempDir()
	p := Pair{
		Cert:    filepath.Join(dir, "cert.pem"),
		Key:     filepath.Join(dir, "key.pem"),
		CertPEM: certgen.CertPEM(cert),
		KeyPEM:  keyPEM,
		Leaf:    cert,
	}
	Write(t, p.Cert, p.CertPEM)
	Write(t, p.Key, p.KeyPEM)
	return p
}

// WriteTo writes p's certificate to certFile and its key to keyFile, in
// place (see Write): the certificate first, then the key, as a careless
// operator would, with a moment in between where the files do not match.
func (p Pair) WriteTo(t testing.TB, certFile, keyFile string) {
	t.Helper()
	Write(t, certFile, p.CertPEM)
	Write(t, keyFile, p.KeyPEM)
}

// WriteTo writes a's certificate to file, in place (see Write).
func (a Authority) WriteTo(t testing.TB, file string) {
	t.Helper()
	Write(t, file, a.PEM)
}

// Write writes data to file in place: the same file (inode), truncated
// and rewritten, not a new file renamed over it. Its modification time
// then is later than before, even on a file system whose clock ticks
// coarser than the time between two writes (it is moved a second past
// the old one if need be), so that a watcher comparing modification
// times always sees the change.
func Write(t testing.TB, file string, data []byte) {
	t.Helper()
	before, statErr := os.Stat(file)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	if statErr != nil {
		return
	}
	after, err := os.Stat(file)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	if !after.ModTime().After(before.ModTime()) {
		later := before.ModTime().Add(time.Second)
		if err := os.Chtimes(file, later, later); err != nil {
			t.Fatalf("testcerts: %v", err)
		}
	}
}
