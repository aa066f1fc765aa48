package tlsfiles_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
	"github.com/sluice-rpc/sluice/tlsfiles"
)

// Bad files are refused when the configuration is made, each error naming
// the file and what is wrong with it.
func TestBadFiles(t *testing.T) {
	s := testcerts.New(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	notPEM := filepath.Join(dir, "not.pem")
	testcerts.Write(t, notPEM, []byte("not PEM at all\n"))
	halfCA := filepath.Join(dir, "half-ca.pem")
	testcerts.Write(t, halfCA, append(append([]byte{}, s.CA.PEM...), s.Untrusted.PEM[:len(s.Untrusted.PEM)/2]...))
	for _, tc := range []struct {
		name   string
		f      tlsfiles.Files
		server bool
		want   string
	}{
		{"no certificate", tlsfiles.Files{}, true, "tlsfiles: a TLS server needs a certificate and its key (Cert and Key are empty)"},
		{"a CA only", tlsfiles.Files{CA: s.CA.File}, true, "tlsfiles: a TLS server needs a certificate and its key"},
		{"certificate without key", tlsfiles.Files{Cert: s.Server.Cert}, true,
			`Files.Key is "", must name the PEM file of the private key of Cert ("` + s.Server.Cert + `")`},
		{"key without certificate", tlsfiles.Files{Key: s.Server.Key}, false,
			`Files.Cert is "", must name the PEM file of the certificate of Key ("` + s.Server.Key + `")`},
		{"missing certificate", tlsfiles.Files{Cert: missing, Key: s.Server.Key}, true, "tlsfiles: reading certificate: open " + missing},
		{"missing key", tlsfiles.Files{Cert: s.Server.Cert, Key: missing}, true, "tlsfiles: reading key: open " + missing},
		{"mismatched key", tlsfiles.Files{Cert: s.Server.Cert, Key: s.Client.Key}, true,
			`tlsfiles: certificate "` + s.Server.Cert + `" and key "` + s.Client.Key + `": tls: private key does not match public key`},
		{"client's mismatched key", tlsfiles.Files{Cert: s.Client.Cert, Key: s.Server.Key}, false, "private key does not match public key"},
		{"a key as the certificate", tlsfiles.Files{Cert: s.Server.Key, Key: s.Server.Key}, true, "tls: failed to find certificate PEM data in certificate input"},
		{"missing CA", tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: missing}, true, "tlsfiles: reading CA: open " + missing},
		{"client's missing CA", tlsfiles.Files{CA: missing}, false, "tlsfiles: reading CA: open " + missing},
		{"CA without certificates", tlsfiles.Files{CA: notPEM}, false, `tlsfiles: CA "` + notPEM + `" holds no PEM certificate`},
		{"a key as the CA", tlsfiles.Files{CA: s.Server.Key}, false, `tlsfiles: CA "` + s.Server.Key + `": block 1 is a "PRIVATE KEY", want only CERTIFICATE blocks`},
		{"a half-written CA", tlsfiles.Files{CA: halfCA}, false, `tlsfiles: CA "` + halfCA + `" ends in an incomplete PEM block (is it being written?)`},
	} {
		var err error
		if tc.server {
			_, err = tc.f.ServerConfig()
		} else {
			_, err = tc.f.ClientConfig("")
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// A Reloader for a client only makes no server configuration.
	r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{CA: s.CA.File}})
	if _, err := r.ServerConfig(); err == nil || !strings.Contains(err.Error(), "a TLS server needs a certificate") {
		t.Errorf("ServerConfig of a Reloader without a certificate: %v", err)
	}
	if _, err := tlsfiles.New(tlsfiles.Config{Files: tlsfiles.Files{Key: s.Server.Key}}); err == nil || !strings.Contains(err.Error(), `tlsfiles: Config.Files.Cert is "", must name the PEM file of the certificate of Key`) {
		t.Errorf("New with a key only: %v", err)
	}
}

func TestEnabled(t *testing.T) {
	if (tlsfiles.Files{}).Enabled() {
		t.Error("the zero Files is enabled")
	}
	for _, f := range []tlsfiles.Files{{CA: "ca.pem"}, {Cert: "c.pem", Key: "k.pem"}, {Key: "k.pem"}} {
		if !f.Enabled() {
			t.Errorf("%+v is not enabled", f)
		}
	}
	if err := (tlsfiles.Config{}).Validate(); err != nil {
		t.Errorf("the zero Config: %v", err)
	}
}

// The configurations hold crypto/tls's defaults but for TLS 1.2 at least,
// and the hooks that follow the files. A server's hands each handshake,
// through GetConfigForClient, one that has crypto/tls verify client
// certificates against the CA.
func TestConfigs(t *testing.T) {
	s := testcerts.New(t)
	r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: s.CA.File}})
	sc := serverConfig(t, r)
	if sc.MinVersion != tls.VersionTLS12 || sc.MaxVersion != 0 || sc.CipherSuites != nil || len(sc.Certificates) != 0 {
		t.Errorf("server configuration %+v: want crypto/tls's defaults but MinVersion", sc)
	}
	if sc.GetConfigForClient == nil || sc.GetCertificate != nil || sc.VerifyConnection != nil || sc.ClientAuth != tls.NoClientCert {
		t.Errorf("server configuration: GetConfigForClient set %v, GetCertificate set %v, VerifyConnection set %v, ClientAuth %v; want GetConfigForClient only",
			sc.GetConfigForClient != nil, sc.GetCertificate != nil, sc.VerifyConnection != nil, sc.ClientAuth)
	}
	hc := forClient(t, sc)
	if hc.MinVersion != tls.VersionTLS12 || hc.MaxVersion != 0 || hc.CipherSuites != nil || hc.GetConfigForClient != nil || hc.VerifyConnection != nil {
		t.Errorf("a handshake's configuration %+v: want crypto/tls's defaults but MinVersion", hc)
	}
	if hc.ClientAuth != tls.RequireAndVerifyClientCert || hc.ClientCAs == nil || !hc.ClientCAs.Equal(mustPool(t, s.CA.PEM)) {
		t.Errorf("a handshake's configuration with a CA: ClientAuth %v, ClientCAs %v; want RequireAndVerifyClientCert and the CA", hc.ClientAuth, hc.ClientCAs)
	}
	if len(hc.Certificates) != 1 || hc.Certificates[0].Leaf.SerialNumber.Cmp(s.Server.Leaf.SerialNumber) != 0 {
		t.Errorf("a handshake's configuration presents %v, want the server's certificate", hc.Certificates)
	}
	if again := forClient(t, sc); again != hc {
		t.Error("two handshakes got two configurations for the same files: want one, made when they were loaded")
	}
	noCA := forClient(t, serverConfig(t, newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key}})))
	if noCA.ClientAuth != tls.NoClientCert || noCA.ClientCAs != nil {
		t.Errorf("server configuration without a CA asks for client certificates: %v", noCA.ClientAuth)
	}
	cc := r.ClientConfig("doorman.example")
	if cc.ServerName != "doorman.example" || cc.InsecureSkipVerify || cc.RootCAs == nil || cc.MinVersion != tls.VersionTLS12 || cc.GetClientCertificate == nil {
		t.Errorf("client configuration %+v", cc)
	}
	if cc := newReloader(t, tlsfiles.Config{}).ClientConfig(""); cc.RootCAs != nil || cc.GetClientCertificate != nil {
		t.Errorf("a client without files: RootCAs %v, GetClientCertificate set %v: want the system's roots and no certificate", cc.RootCAs, cc.GetClientCertificate != nil)
	}
}

// forClient returns the configuration sc's GetConfigForClient gives a
// handshake, failing the test on an error or none.
func forClient(t testing.TB, sc *tls.Config) *tls.Config {
	t.Helper()
	c, err := sc.GetConfigForClient(&tls.ClientHelloInfo{ServerName: "anything"})
	if err != nil || c == nil {
		t.Fatalf("GetConfigForClient: %v, %v", c, err)
	}
	return c
}

func mustPool(t *testing.T, pemCerts []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemCerts) {
		t.Fatal("no certificate in the PEM")
	}
	return p
}

// The handshakes' looks at the files stop once the interval is negative;
// Reload still reads them.
func TestNoLooks(t *testing.T) {
	s := testcerts.New(t)
	r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key}, NoReload: true})
	sc := serverConfig(t, r)
	if err := os.Remove(s.Server.Cert); err != nil {
		t.Fatal(err)
	}
	forClient(t, sc)
	if err := r.LastError(); err != nil {
		t.Errorf("a handshake looked at the files: %v", err)
	}
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), "reading certificate") {
		t.Errorf("Reload of a removed certificate: %v", err)
	}
}

// New's error for a file that did not load says whether it is the CA's,
// whichever of the files are named.
func TestLoadErrorSaysWhichFile(t *testing.T) {
	c := testcerts.New(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		f  tlsfiles.Files
		ca bool
	}{
		{tlsfiles.Files{Cert: missing, Key: c.Server.Key, CA: c.CA.File}, false},
		{tlsfiles.Files{Cert: c.Server.Cert, Key: missing, CA: missing}, false},
		{tlsfiles.Files{Cert: c.Server.Cert, Key: c.Server.Key, CA: missing}, true},
		{tlsfiles.Files{CA: missing}, true},
	} {
		_, err := tlsfiles.New(tlsfiles.Config{Files: tc.f})
		var le *tlsfiles.LoadError
		if !errors.As(err, &le) || le.CA != tc.ca || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("New(%+v) = %v, want a *LoadError with CA %v wrapping fs.ErrNotExist", tc.f, err, tc.ca)
		}
	}
}
