// Command gencerts writes the fixed certificates of Sluice's examples: a
// CA, a server certificate for localhost, 127.0.0.1 and ::1, and client
// certificates, each with an ECDSA P-256 key, valid from 2025 to 2125 so
// that an example's output never changes. The examples run it through go
// generate:
//
//	go run ../internal/gencerts -dir testdata -ca "example CA" -server "example server" \
//	    -client client=billing,spiffe://example.test/billing,billing.example.test
//
// It writes DIR/ca.pem, DIR/server.pem and DIR/server-key.pem, and for each
// -client FILE=CN,URI[,DNS] DIR/FILE.pem and DIR/FILE-key.pem. The keys are
// for tests and examples only: they are committed.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

var (
	notBefore = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	notAfter  = time.Date(2125, 1, 1, 0, 0, 0, 0, time.UTC)
)

// clients are the -client flags.
type clients []string

func (c *clients) String() string     { return strings.Join(*c, " ") }
func (c *clients) Set(v string) error { *c = append(*c, v); return nil }

func main() {
	log.SetFlags(0)
	dir := flag.String("dir", ".", "write the PEM files to `DIR`")
	caName := flag.String("ca", "example CA", "the CA's common `NAME`")
	serverName := flag.String("server", "example server", "the server certificate's common `NAME`")
	var cs clients
	flag.Var(&cs, "client", "a client certificate, `FILE=CN,URI[,DNS]` (repeatable)")
	flag.Parse()

	caKey := key()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: *caName, Organization: []string{"Sluice example"}},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caCert := sign(ca, ca, caKey, caKey, filepath.Join(*dir, "ca.pem"), "")

	type leaf struct {
		tmpl *x509.Certificate
		name string
	}
	leaves := []leaf{{&x509.Certificate{
		Subject:     pkix.Name{CommonName: *serverName, Organization: []string{"Sluice example"}},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, "server"}}
	for _, c := range cs {
		file, spec, ok := strings.Cut(c, "=")
		parts := strings.Split(spec, ",")
		if !ok || file == "" || len(parts) < 2 || len(parts) > 3 {
			log.Fatalf("gencerts: -client %q: want FILE=CN,URI[,DNS]", c)
		}
		id, err := url.Parse(parts[1])
		if err != nil || id.Scheme == "" {
			log.Fatalf("gencerts: -client %q: the URI %q is not an absolute URI", c, parts[1])
		}
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: parts[0], Organization: []string{"Sluice example"}},
			URIs:        []*url.URL{id},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if len(parts) == 3 {
			tmpl.DNSNames = []string{parts[2]}
		}
		leaves = append(leaves, leaf{tmpl, file})
	}
	for i, l := range leaves {
		l.tmpl.SerialNumber = big.NewInt(int64(i + 2))
		l.tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		sign(l.tmpl, caCert, key(), caKey, filepath.Join(*dir, l.name+".pem"), filepath.Join(*dir, l.name+"-key.pem"))
	}
	fmt.Printf("gencerts: wrote %d certificates to %s\n", len(leaves)+1, *dir)
}

func key() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	return k
}

// sign makes tmpl's certificate for key, signed by parent's signer, valid
// from notBefore to notAfter, and writes it to certFile and, when keyFile
// is set, key to keyFile.
func sign(tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey, certFile, keyFile string) *x509.Certificate {
	tmpl.NotBefore, tmpl.NotAfter = notBefore, notAfter
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
