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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	key  *ecdsa.PrivateKey
}

// Leaf describes a certificate for Authority.Issue to make.
type Leaf struct {
	// CommonName is the subject's common name.
	CommonName string
	// DNSNames, IPs and URIs are the subject alternative names.
	DNSNames []string
	IPs      []net.IP
	URIs     []string
	// Usage is the extended key usage: x509.ExtKeyUsageServerAuth or
	// x509.ExtKeyUsageClientAuth. The zero value, x509.ExtKeyUsageAny,
	// makes a certificate good for either.
	Usage x509.ExtKeyUsage
	// NotBefore and NotAfter bound the validity; zero means an hour ago and
	// a day from now.
	NotBefore, NotAfter time.Time
}

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
	key := newKey(t)
	tmpl := template(t, cn, time.Time{}, time.Time{})
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	cert := create(t, tmpl, tmpl, key, key)
	a := Authority{File: filepath.Join(t.TempDir(), "ca.pem"), PEM: certPEM(cert), Cert: cert, key: key}
	Write(t, a.File, a.PEM)
	return a
}

// Issue makes the certificate l describes, signed by a, with a new key,
// and writes both to files in t.TempDir.
func (a Authority) Issue(t testing.TB, l Leaf) Pair {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, l.CommonName, l.NotBefore, l.NotAfter)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{l.Usage}
	tmpl.DNSNames, tmpl.IPAddresses = l.DNSNames, l.IPs
	for _, s := range l.URIs {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("testcerts: URI %q: %v", s, err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	cert := create(t, tmpl, a.Cert, key, a.key)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	dir := t.TempDir()
	p := Pair{
		Cert:    filepath.Join(dir, "cert.pem"),
		Key:     filepath.Join(dir, "key.pem"),
		CertPEM: certPEM(cert),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
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

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	return k
}

func template(t testing.TB, cn string, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	now := time.Now()
	if notBefore.IsZero() {
		notBefore = now.Add(-time.Hour)
	}
	if notAfter.IsZero() {
		notAfter = now.Add(24 * time.Hour)
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"Sluice tests"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
	}
}

func create(t testing.TB, tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	return cert
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}
