package tlsfiles

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/localfile"
)

// maxFileSize is the most a file is read: 1 MiB, hundreds of
// certificates. A larger file is an error, not read whole: it is no PEM
// file of a certificate, key or CA.
const maxFileSize = 1 << 20

// MaxChainCerts is the most certificates a certificate file may hold:
// the certificate and its intermediates. Real chains hold two to four; a
// longer one is refused (at New, and on a reload, which keeps the last
// good one), since every handshake would carry it, and most peers refuse
// a chain that long.
const MaxChainCerts = 16

// Files names the PEM files of one side of a TLS connection. The zero
// value is plaintext (see Enabled). Files is a plain value; the files are
// read by New (or ServerConfig and ClientConfig, which call it).
type Files struct {
	// Cert is a PEM file holding the certificate to present, followed by
	// its intermediates. Required for a server; optional for a client
	// (with Key), which then presents it.
	Cert string
	// Key is a PEM file holding Cert's private key. Set exactly when Cert
	// is.
	Key string
	// CA is a PEM file holding the certificates that verify the peer, and
	// nothing else. For a server: set, clients must present a certificate
	// one of them signed; empty, clients present none. For a client: the
	// server's certificate must chain to one of them; empty means the
	// system's roots.
	CA string
}

// errNoServerCert is ServerConfig's error for Files without a certificate.
var errNoServerCert = errors.New("tlsfiles: a TLS server needs a certificate and its key (Cert and Key are empty)")

// Enabled reports whether any file is named: a side with no files speaks
// plaintext (a client may still ask for TLS with the system's roots, see
// ClientConfig).
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Validate reports the first thing wrong with f as a set: a certificate
// without its key or a key without its certificate. It reads no file.
func (f Files) Validate() error {
	switch {
	case f.Cert != "" && f.Key == "":
		return config.Errorf("tlsfiles", "Files.Key", f.Key, "must name the PEM file of the private key of Cert (%q)", f.Cert)
	case f.Key != "" && f.Cert == "":
		return config.Errorf("tlsfiles", "Files.Cert", f.Cert, "must name the PEM file of the certificate of Key (%q)", f.Key)
	}
	return nil
}

// ServerConfig returns the TLS configuration of a server presenting Cert,
// requiring client certificates signed by CA when CA is set, and picking
// up files replaced on disk (see the package comment). It is
// New(Config{Files: f}) followed by Reloader.ServerConfig: files that
// change and do not load are logged on slog.Default(); use New with a
// Logger to log them elsewhere.
func (f Files) ServerConfig() (*tls.Config, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if f.Cert == "" {
		return nil, errNoServerCert
	}
	r, err := New(Config{Files: f})
	if err != nil {
		return nil, err
	}
	return r.ServerConfig()
}

// ClientConfig returns the TLS configuration of a client verifying the
// server against CA (the system's roots when empty) and presenting Cert
// when set. serverName, when not empty, is the name the server's
// certificate must carry instead of the host the client dials; an IP
// address is checked against the certificate's IP addresses. The
// certificate presented follows the files; the CA is the one read now
// (see the package comment, and Reloader.ClientConfig for a CA that
// follows its file).
func (f Files) ClientConfig(serverName string) (*tls.Config, error) {
	r, err := New(Config{Files: f})
	if err != nil {
		return nil, err
	}
	return r.ClientConfig(serverName), nil
}

// keyPair reads Cert and Key and parses them as a pair. Its errors name
// the file; the caller adds the package's prefix.
func (f Files) keyPair() (*tls.Certificate, error) {
	// Read the files here, so that an error names the file that is
	// missing; tls.X509KeyPair names the rule that failed.
	certPEM, err := readFile(f.Cert)
	if err != nil {
		return nil, fmt.Errorf("reading certificate: %w", err)
	}
	keyPEM, err := readFile(f.Key)
	if err != nil {
		return nil, fmt.Errorf("reading key: %w", err)
	}
	if incomplete(certPEM) {
		return nil, fmt.Errorf("certificate %q ends in an incomplete PEM block (is it being written?)", f.Cert)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate %q and key %q: %w", f.Cert, f.Key, err)
	}
	if n := len(cert.Certificate); n > MaxChainCerts {
		return nil, fmt.Errorf("certificate %q holds a chain of %d certificates, more than %d (MaxChainCerts): name the certificate and its intermediates only", f.Cert, n, MaxChainCerts)
	}
	return &cert, nil
}

// checkExpired reports a certificate that expired before now, naming
// file: a reload refuses it and keeps presenting the one before, with
// which handshakes still succeed (every handshake presenting an expired
// certificate fails). One not valid yet is not refused: it is most often
// a clock a little behind the issuer's, and becomes valid by itself.
func checkExpired(cert *tls.Certificate, file string, now time.Time) error {
	if leaf := cert.Leaf; leaf != nil && now.After(leaf.NotAfter) { // tls.X509KeyPair parsed it
		return fmt.Errorf("certificate %q expired at %s: a reload installs only a certificate valid now", file, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// loadPool reads the PEM certificates in file. A file with anything but
// certificates in it, or none, is an error: a key or a typo given as the
// CA would otherwise leave nothing to trust. Its errors name the file;
// the caller adds the package's prefix.
func loadPool(file string) (*x509.CertPool, error) {
	data, err := readFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading CA: %w", err)
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
			return nil, fmt.Errorf("CA %q: block %d is a %q, want only CERTIFICATE blocks", file, n+1, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("CA %q: certificate %d: %w", file, n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("CA %q holds no PEM certificate", file)
	}
	if incomplete(data) {
		return nil, fmt.Errorf("CA %q ends in an incomplete PEM block (is it being written?)", file)
	}
	return pool, nil
}

// readFile reads file, a regular file of at most maxFileSize bytes,
// through localfile.Read: it never blocks on what is not a regular file
// (a named pipe with no writer would block the open, and with it the
// handshake that looks at the files), nor reads more than maxFileSize+1
// bytes. Its errors name the file.
func readFile(file string) ([]byte, error) {
	return localfile.Read(file, maxFileSize, "a PEM file")
}

// incomplete reports whether data ends in the start of a PEM block that
// pem.Decode cannot read: a file cut short while being written, whose
// complete blocks alone would parse (a certificate without its
// intermediates, a CA bundle missing its last authorities).
func incomplete(data []byte) bool {
	rest := data
	for {
		b, r := pem.Decode(rest)
		if b == nil {
			break
		}
		rest = r
	}
	return bytes.Contains(rest, []byte("-----BEGIN"))
}
