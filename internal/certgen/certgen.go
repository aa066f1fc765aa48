// Package certgen issues ECDSA P-256 certificates: a self-signed
// certificate authority and the server and client certificates it signs.
// It is the one certificate maker of the repository: the tests' helper
// (internal/testkit/testcerts) and the examples' generator
// (internal/gencerts) both call it. The keys it makes are for tests and
// examples only.
package certgen

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"
)

// Leaf describes a certificate to issue.
type Leaf struct {
	// CommonName and Organization make the subject.
	CommonName, Organization string
	// DNSNames, IPs and URIs are the subject alternative names; a URI
	// must be absolute (a SPIFFE ID, say).
	DNSNames []string
	IPs      []net.IP
	URIs     []string
	// Usage is the extended key usage: x509.ExtKeyUsageServerAuth or
	// x509.ExtKeyUsageClientAuth. The zero value, x509.ExtKeyUsageAny,
	// makes a certificate good for either.
	Usage x509.ExtKeyUsage
	// NotBefore and NotAfter bound the validity; zero means an hour ago
	// and a day from now.
	NotBefore, NotAfter time.Time
}

// Authority is a certificate authority: its certificate and the key that
// signs what it issues.
type Authority struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewAuthority makes a self-signed authority whose subject and validity
// are l's (its names and usage are ignored).
func NewAuthority(l Leaf) (Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Authority{}, err
	}
	tmpl, err := template(l)
	if err != nil {
		return Authority{}, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	cert, err := create(tmpl, tmpl, key, key)
	if err != nil {
		return Authority{}, err
	}
	return Authority{Cert: cert, Key: key}, nil
}

// Issue makes the certificate l describes, with a new key, signed by a.
func (a Authority) Issue(l Leaf) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := template(l)
	if err != nil {
		return nil, nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{l.Usage}
	tmpl.DNSNames, tmpl.IPAddresses = l.DNSNames, l.IPs
	for _, s := range l.URIs {
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" {
			return nil, nil, fmt.Errorf("certgen: %q is not an absolute URI", s)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	cert, err := create(tmpl, a.Cert, key, a.Key)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// CertPEM encodes c as a PEM CERTIFICATE block.
func CertPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// KeyPEM encodes k as a PEM PRIVATE KEY block (PKCS #8).
func KeyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// template is l's subject and validity with a random serial number.
func template(l Leaf) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if l.NotBefore.IsZero() {
		l.NotBefore = now.Add(-time.Hour)
	}
	if l.NotAfter.IsZero() {
		l.NotAfter = now.Add(24 * time.Hour)
	}
	subject := pkix.Name{CommonName: l.CommonName}
	if l.Organization != "" {
		subject.Organization = []string{l.Organization}
	}
	return &x509.Certificate{SerialNumber: serial, Subject: subject, NotBefore: l.NotBefore, NotAfter: l.NotAfter}, nil
}

func create(tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, fmt.Errorf("certgen: %v", err)
	}
	return x509.ParseCertificate(der)
}
