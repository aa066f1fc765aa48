// Package grpctls turns certificate, key and CA files into gRPC transport
// credentials, for a server and for its clients: the capability of the
// original Doorman's -tls, -cert_file, -key_file and -ca_file flags,
// behind Sluice's --tls-cert, --tls-key and --tls-ca.
//
// A server presents Cert (with Key); with CA set it also requires every
// client to present a certificate CA signed (mutual TLS). A client
// verifies the server against CA (the system's roots when CA is empty)
// and, with Cert and Key set, presents them. Both sides speak TLS 1.2 or
// later. The files are read once, when the credentials are made: a
// rotated certificate takes effect on restart.
package grpctls

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc/credentials"
)

// Files names the PEM files of one side of a TLS connection. The zero
// value is plaintext (see Enabled).
type Files struct {
	// Cert is a PEM file holding the certificate to present, followed by
	// its intermediates. Required for a server; optional for a client
	// (with Key), which then presents it.
	Cert string
	// Key is a PEM file holding Cert's private key. Set exactly when Cert
	// is.
	Key string
	// CA is a PEM file holding the certificates that verify the peer. For
	// a server: set, clients must present a certificate one of them signed;
	// empty, clients present none. For a client: the server's certificate
	// must chain to one of them; empty means the system's roots.
	CA string
}

// Enabled reports whether any file is named: a side with no files speaks
// plaintext (a client may still ask for TLS with the system's roots, see
// ClientCredentials).
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Validate reports the first thing wrong with f as a set: a certificate
// without its key or a key without its certificate. It reads no file.
func (f Files) Validate() error {
	switch {
	case f.Cert != "" && f.Key == "":
		return fmt.Errorf("grpctls: certificate %q has no key file: name the PEM file of its private key too", f.Cert)
	case f.Key != "" && f.Cert == "":
		return fmt.Errorf("grpctls: key %q has no certificate file: name the PEM file of its certificate too", f.Key)
	}
	return nil
}

// ServerConfig returns the TLS configuration of a server presenting Cert,
// requiring client certificates signed by CA when CA is set.
func (f Files) ServerConfig() (*tls.Config, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if f.Cert == "" {
		return nil, errors.New("grpctls: a TLS server needs a certificate and its key (Cert and Key are empty)")
	}
	cert, err := f.keyPair()
	if err != nil {
		return nil, err
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pool, err := loadPool(f.CA)
		if err != nil {
			return nil, err
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// ServerCredentials returns ServerConfig as gRPC credentials, for
// grpc.Creds.
func (f Files) ServerCredentials() (credentials.TransportCredentials, error) {
	c, err := f.ServerConfig()
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(c), nil
}

// ClientConfig returns the TLS configuration of a client verifying the
// server against CA (the system's roots when empty) and presenting Cert
// when set. serverName, when not empty, is the name the server's
// certificate must carry instead of the host the client dials (the
// original's server host override); an IP address is checked against the
// certificate's IP addresses.
func (f Files) ClientConfig(serverName string) (*tls.Config, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	c := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pool, err := loadPool(f.CA)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if f.Cert != "" {
		cert, err := f.keyPair()
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// ClientCredentials returns ClientConfig as gRPC credentials, for
// grpc.WithTransportCredentials (leasing.ClientConfig.DialOptions).
func (f Files) ClientCredentials(serverName string) (credentials.TransportCredentials, error) {
	c, err := f.ClientConfig(serverName)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(c), nil
}

func (f Files) keyPair() (tls.Certificate, error) {
	// Read the files here, so that an error names the file that is
	// missing; tls.X509KeyPair names the rule that failed.
	certPEM, err := os.ReadFile(f.Cert)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("grpctls: reading certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("grpctls: reading key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("grpctls: certificate %q and key %q: %w", f.Cert, f.Key, err)
	}
	return cert, nil
}

// loadPool reads the PEM certificates in file. A file with anything but
// certificates in it, or none, is an error: a key or a typo given as the
// CA would otherwise leave nothing to trust.
func loadPool(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("grpctls: reading CA: %w", err)
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("grpctls: CA %q: block %d is a %q, want only CERTIFICATE blocks", file, n+1, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("grpctls: CA %q: certificate %d: %w", file, n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("grpctls: CA %q holds no PEM certificate", file)
	}
	return pool, nil
}
