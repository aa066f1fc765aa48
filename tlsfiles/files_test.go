package tlsfiles_test

import (
	"crypto/tls"
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
			`tlsfiles: certificate "` + s.Server.Cert + `" has no key file: name the PEM file of its private key too`},
		{"key without certificate", tlsfiles.Files{Key: s.Server.Key}, false,
			`tlsfiles: key "` + s.Server.Key + `" has no certificate file: name the PEM file of its certificate too`},
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
	if _, err := tlsfiles.New(tlsfiles.Config{Files: tlsfiles.Files{Key: s.Server.Key}}); err == nil || !strings.Contains(err.Error(), "has no certificate file") {
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
// and the hooks that follow the files.
func TestConfigs(t *testing.T) {
	s := testcerts.New(t)
	r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: s.CA.File}})
	sc := serverConfig(t, r)
	if sc.MinVersion != tls.VersionTLS12 || sc.MaxVersion != 0 || sc.CipherSuites != nil || len(sc.Certificates) != 0 {
		t.Errorf("server configuration %+v: want crypto/tls's defaults but MinVersion", sc)
	}
	if sc.ClientAuth != tls.RequireAnyClientCert || sc.VerifyConnection == nil || sc.GetCertificate == nil {
		t.Errorf("server configuration with a CA: ClientAuth %v, VerifyConnection set %v, GetCertificate set %v",
			sc.ClientAuth, sc.VerifyConnection != nil, sc.GetCertificate != nil)
	}
	cert, err := sc.GetCertificate(&tls.ClientHelloInfo{ServerName: "anything"})
	if err != nil || cert == nil || cert.Leaf.SerialNumber.Cmp(s.Server.Leaf.SerialNumber) != 0 {
		t.Errorf("GetCertificate: %v, %v", cert, err)
	}
	noCA := serverConfig(t, newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key}}))
	if noCA.ClientAuth != tls.NoClientCert || noCA.VerifyConnection != nil {
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

// The handshakes' looks at the files stop once the interval is negative;
// Reload still reads them.
func TestNoLooks(t *testing.T) {
	s := testcerts.New(t)
	r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key}, ReloadInterval: -1})
	sc := serverConfig(t, r)
	if err := os.Remove(s.Server.Cert); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.GetCertificate(&tls.ClientHelloInfo{}); err != nil {
		t.Fatal(err)
	}
	if err := r.LastError(); err != nil {
		t.Errorf("a handshake looked at the files: %v", err)
	}
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), "reading certificate") {
		t.Errorf("Reload of a removed certificate: %v", err)
	}
}
