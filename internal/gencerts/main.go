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
	"crypto/x509"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/internal/certgen"
)

var (
	notBefore = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	notAfter  = time.Date(2125, 1, 1, 0, 0, 0, 0, time.UTC)
)

// organization is the subject's organization of every certificate.
const organization = "Sluice example"

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

	ca, err := certgen.NewAuthority(certgen.Leaf{CommonName: *caName, Organization: organization, NotBefore: notBefore, NotAfter: notAfter})
	if err != nil {
		log.Fatalf("gencerts: %v", err)
	}
	write(filepath.Join(*dir, "ca.pem"), certgen.CertPEM(ca.Cert))

	type leaf struct {
		certgen.Leaf
		file string
	}
	leaves := []leaf{{certgen.Leaf{
		CommonName: *serverName,
		DNSNames:   []string{"localhost"},
		IPs:        []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		Usage:      x509.ExtKeyUsageServerAuth,
	}, "server"}}
	for _, c := range cs {
		file, spec, ok := strings.Cut(c, "=")
		parts := strings.Split(spec, ",")
		if !ok || file == "" || len(parts) < 2 || len(parts) > 3 {
			log.Fatalf("gencerts: -client %q: want FILE=CN,URI[,DNS]", c)
		}
		l := certgen.Leaf{CommonName: parts[0], URIs: []string{parts[1]}, Usage: x509.ExtKeyUsageClientAuth}
		if len(parts) == 3 {
			l.DNSNames = []string{parts[2]}
		}
		leaves = append(leaves, leaf{l, file})
	}
	for _, l := range leaves {
		l.Organization, l.NotBefore, l.NotAfter = organization, notBefore, notAfter
		cert, key, err := ca.Issue(l.Leaf)
		if err != nil {
			log.Fatalf("gencerts: %s: %v", l.file, err)
		}
		keyPEM, err := certgen.KeyPEM(key)
		if err != nil {
			log.Fatalf("gencerts: %s: %v", l.file, err)
		}
		write(filepath.Join(*dir, l.file+".pem"), certgen.CertPEM(cert))
		write(filepath.Join(*dir, l.file+"-key.pem"), keyPEM)
	}
	fmt.Printf("gencerts: wrote %d certificates to %s\n", len(leaves)+1, *dir)
}

func write(file string, data []byte) {
	if err := os.WriteFile(file, data, 0o600); err != nil {
		log.Fatal(err)
	}
}
