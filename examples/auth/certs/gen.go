//go:build ignore

// gen writes the certificates of the auth example: a CA; a server
// certificate for localhost, 127.0.0.1 and ::1; and two client
// certificates with SPIFFE IDs, spiffe://sluice.test/client (allowed to
// call greeter) and spiffe://sluice.test/reporting (not). They are valid
// from 2025 to 2125, so that the example's output never changes. Run it
// from the examples/auth directory: go generate.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log"
	"math/big"
	"net"
	"net/url"
	"os"
	"time"
)

var (
	notBefore = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	notAfter  = time.Date(2125, 1, 1, 0, 0, 0, 0, time.UTC)
)

func main() {
	caKey := key()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "auth example CA", Organization: []string{"Sluice example"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caCert := sign(ca, ca, caKey, caKey, "certs/ca.pem", "")

	leaves := []struct {
		tmpl      *x509.Certificate
		cert, key string
	}{
		{&x509.Certificate{
			Subject:     pkix.Name{CommonName: "greeter", Organization: []string{"Sluice example"}},
			DNSNames:    []string{"localhost"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}, "certs/server.pem", "certs/server-key.pem"},
	}
	for _, client := range []string{"client", "reporting"} {
		id, _ := url.Parse("spiffe://sluice.test/" + client)
		leaves = append(leaves, struct {
			tmpl      *x509.Certificate
			cert, key string
		}{&x509.Certificate{
			Subject:     pkix.Name{CommonName: client, Organization: []string{"Sluice example"}},
			URIs:        []*url.URL{id},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, "certs/" + client + ".pem", "certs/" + client + "-key.pem"})
	}
	for i, l := range leaves {
		l.tmpl.SerialNumber = big.NewInt(int64(i + 2))
		l.tmpl.NotBefore, l.tmpl.NotAfter = notBefore, notAfter
		l.tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		sign(l.tmpl, caCert, key(), caKey, l.cert, l.key)
	}
}

func key() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	return k
}

// sign makes tmpl's certificate for key, signed by parent's signer, and
// writes it to certFile and, when keyFile is set, key to keyFile.
func sign(tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey, certFile, keyFile string) *x509.Certificate {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		log.Fatal(err)
	}
	write(certFile, "CERTIFICATE", der)
	if keyFile != "" {
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			log.Fatal(err)
		}
		write(keyFile, "PRIVATE KEY", kder)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		log.Fatal(err)
	}
	return c
}

func write(file, typ string, der []byte) {
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		log.Fatal(err)
	}
}
