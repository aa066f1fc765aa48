package tlsfiles_test

import (
	"crypto/tls"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
	"github.com/sluice-rpc/sluice/tlsfiles"
)

var versions = []struct {
	name string
	max  uint16
}{{"TLS 1.2", tls.VersionTLS12}, {"TLS 1.3", tls.VersionTLS13}}

// A client presenting a certificate the CA signed is served, and each side
// reads the other's identity.
func TestMutualTLS(t *testing.T) {
	s := testcerts.New(t)
	srv := serve(t, serverConfig(t, newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: s.CA.File}})))
	client := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Client.Cert, Key: s.Client.Key, CA: s.CA.File}})
	for _, v := range versions {
		cfg := client.ClientConfig("")
		cfg.MaxVersion = v.max
		c := mustDial(t, srv.addr, cfg)
		h := srv.next(t)
		if h.err != nil {
			t.Fatalf("%s: the server's handshake: %v", v.name, h.err)
		}
		if got := h.state.Version; got != v.max {
			t.Errorf("%s: version %x", v.name, got)
		}
		if len(h.state.VerifiedChains) == 0 {
			t.Errorf("%s: the server's ConnectionState has no VerifiedChains: crypto/tls did not verify the client", v.name)
		}
		id, ok := tlsfiles.IdentityOf(&h.state)
		want := tlsfiles.Identity{
			Subject:    "CN=" + testcerts.ClientName + ",O=Sluice tests",
			CommonName: testcerts.ClientName,
			DNSNames:   []string{testcerts.ClientDNS},
			URIs:       []string{testcerts.ClientURI},
		}
		if !ok || !reflect.DeepEqual(id, want) {
			t.Errorf("%s: the server reads the client's identity as %+v, %v; want %+v", v.name, id, ok, want)
		}
		state := c.ConnectionState()
		if id, ok := tlsfiles.IdentityOf(&state); !ok || id.CommonName != "sluice test server" || !reflect.DeepEqual(id.DNSNames, []string{"localhost"}) {
			t.Errorf("%s: the client reads the server's identity as %+v, %v", v.name, id, ok)
		}
	}
	// The certificate names localhost too.
	_, port, _ := net.SplitHostPort(srv.addr)
	mustDial(t, "localhost:"+port, client.ClientConfig(""))
	if h := srv.next(t); h.err != nil {
		t.Errorf("dialling localhost: the server's handshake: %v", h.err)
	}
}

// A server with a CA refuses a client without a certificate, with one an
// unknown authority signed, with an expired one, and with a certificate
// for servers only; both sides' errors say why.
func TestServerRefusesClients(t *testing.T) {
	s := testcerts.New(t)
	srv := serve(t, serverConfig(t, newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: s.CA.File}})))
	for _, tc := range []struct {
		name     string
		client   tlsfiles.Files
		server   string // in the server's error
		client12 string // in the client's error, TLS 1.2
		client13 string // in the client's error, TLS 1.3
	}{
		{"no certificate", tlsfiles.Files{CA: s.CA.File},
			"tls: client didn't provide a certificate", "remote error: tls: handshake failure", "remote error: tls: certificate required"},
		{"an untrusted certificate", tlsfiles.Files{Cert: s.UntrustedClient.Cert, Key: s.UntrustedClient.Key, CA: s.CA.File},
			"tls: failed to verify certificate: x509: certificate signed by unknown authority", "remote error: tls: unknown certificate authority", "remote error: tls: unknown certificate authority"},
		{"an expired certificate", tlsfiles.Files{Cert: s.Expired.Cert, Key: s.Expired.Key, CA: s.CA.File},
			"tls: failed to verify certificate: x509: certificate has expired", "remote error: tls: expired certificate", "remote error: tls: expired certificate"},
		{"a server's certificate", tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: s.CA.File},
			"x509: certificate specifies an incompatible key usage", "remote error: tls: bad certificate", "remote error: tls: bad certificate"},
	} {
		for _, v := range versions {
			cfg, err := tc.client.ClientConfig("")
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxVersion = v.max
			_, cerr := dial(t, srv.addr, cfg)
			h := srv.next(t)
			want := tc.client12
			if v.max == tls.VersionTLS13 {
				want = tc.client13
			}
			if cerr == nil || !strings.Contains(cerr.Error(), want) {
				t.Errorf("%s, %s: the client's error is %v, want %q", tc.name, v.name, cerr, want)
			}
			if h.err == nil || !strings.Contains(h.err.Error(), tc.server) {
				t.Errorf("%s, %s: the server's error is %v, want %q", tc.name, v.name, h.err, tc.server)
			}
		}
	}
}

// A client refuses a server whose certificate an unknown authority signed
// or names another host, and accepts one for another name when told that
// name; an IP address is checked against the certificate's IP addresses.
func TestClientVerifiesServer(t *testing.T) {
	s := testcerts.New(t)
	serverFor := func(p testcerts.Pair) *server {
		return serve(t, serverConfig(t, newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: p.Cert, Key: p.Key}})))
	}
	good, wrong, untrusted := serverFor(s.Server), serverFor(s.WrongName), serverFor(s.UntrustedServer)
	trusting := tlsfiles.Files{CA: s.CA.File}
	for _, tc := range []struct {
		name       string
		srv        *server
		client     tlsfiles.Files
		serverName string
		want       string // in the client's error; "" for success
	}{
		{"the right server", good, trusting, "", ""},
		{"the right server named by its IP", good, trusting, "127.0.0.1", ""},
		{"the right server under another name", good, trusting, "doorman.example",
			"tls: failed to verify certificate: x509: certificate is valid for localhost, not doorman.example"},
		{"the right server under another IP", good, trusting, "127.0.0.2",
			"x509: certificate is valid for 127.0.0.1, ::1, not 127.0.0.2"},
		{"a server for a wrong name", wrong, trusting, "",
			"tls: failed to verify certificate: x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs"},
		{"a server for a wrong name, dialled as localhost", wrong, trusting, "localhost",
			"tls: failed to verify certificate: x509: certificate is valid for " + testcerts.WrongName + ", not localhost"},
		{"a server for a wrong name, told that name", wrong, trusting, testcerts.WrongName, ""},
		{"an untrusted server", untrusted, trusting, "",
			"tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{"the right server, with the system's roots", good, tlsfiles.Files{}, "",
			"tls: failed to verify certificate: x509: certificate signed by unknown authority"},
	} {
		cfg, err := tc.client.ClientConfig(tc.serverName)
		if err != nil {
			t.Fatal(err)
		}
		_, cerr := dial(t, tc.srv.addr, cfg)
		h := tc.srv.next(t)
		if tc.want == "" {
			if cerr != nil || h.err != nil {
				t.Errorf("%s: the client's error %v, the server's %v", tc.name, cerr, h.err)
			}
			continue
		}
		if cerr == nil || !strings.Contains(cerr.Error(), tc.want) {
			t.Errorf("%s: the client's error is %v, want %q", tc.name, cerr, tc.want)
		}
		if h.err == nil || !strings.Contains(h.err.Error(), "remote error: tls: bad certificate") {
			t.Errorf("%s: the server's error is %v, want a bad certificate alert", tc.name, h.err)
		}
	}
}

// A server without a CA asks for no client certificate: a client with one
// is served, and has no identity.
func TestServerWithoutCA(t *testing.T) {
	s := testcerts.New(t)
	srv := serve(t, serverConfig(t, newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key}})))
	cfg, err := tlsfiles.Files{Cert: s.Client.Cert, Key: s.Client.Key, CA: s.CA.File}.ClientConfig("")
	if err != nil {
		t.Fatal(err)
	}
	mustDial(t, srv.addr, cfg)
	h := srv.next(t)
	if h.err != nil {
		t.Fatal(h.err)
	}
	if id, ok := tlsfiles.IdentityOf(&h.state); ok {
		t.Errorf("a client of a server without a CA has identity %+v", id)
	}
}

// The hook of a server's configuration survives Clone, and a clone is
// customised by wrapping it, as gRPC's credentials clone the
// configuration and add their ALPN protocol to what GetConfigForClient
// returns.
func TestServerConfigClone(t *testing.T) {
	s := testcerts.New(t)
	orig := serverConfig(t, newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: s.CA.File}}))
	cfg := orig.Clone()
	base := cfg.GetConfigForClient
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		c, err := base(hello)
		if err != nil {
			return nil, err
		}
		c = c.Clone()
		c.NextProtos = []string{"h2"}
		return c, nil
	}
	srv := serve(t, cfg)
	client, err := tlsfiles.Files{Cert: s.Client.Cert, Key: s.Client.Key, CA: s.CA.File}.ClientConfig("")
	if err != nil {
		t.Fatal(err)
	}
	client.NextProtos = []string{"h2"}
	c := mustDial(t, srv.addr, client)
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Errorf("negotiated %q, want h2", p)
	}
	if h := srv.next(t); h.err != nil {
		t.Fatal(h.err)
	}
	_, err = dial(t, srv.addr, mustClientConfig(t, tlsfiles.Files{Cert: s.UntrustedClient.Cert, Key: s.UntrustedClient.Key, CA: s.CA.File}))
	if h := srv.next(t); err == nil || h.err == nil {
		t.Errorf("the clone served an untrusted client: %v, %v", err, h.err)
	}
	if c, _ := orig.GetConfigForClient(&tls.ClientHelloInfo{}); c.NextProtos != nil {
		t.Errorf("the wrapper changed the configuration every handshake shares: NextProtos %q", c.NextProtos)
	}
}

// Fields set on ServerConfig's configuration before its first handshake
// hold for the handshakes: a minimum version of TLS 1.3 refuses a client
// capped at TLS 1.2, and client authentication set by hand (no CA in the
// files) refuses a client without a certificate. (They were ignored:
// both clients were served.)
func TestServerConfigKeepsItsFields(t *testing.T) {
	s := testcerts.New(t)
	r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key}})
	tls13 := serverConfig(t, r)
	tls13.MinVersion = tls.VersionTLS13
	srv := serve(t, tls13)
	old := mustClientConfig(t, tlsfiles.Files{CA: s.CA.File})
	old.MaxVersion = tls.VersionTLS12
	_, err := dial(t, srv.addr, old)
	if h := srv.next(t); err == nil || h.err == nil || !strings.Contains(h.err.Error(), "unsupported versions") {
		t.Errorf("a TLS 1.2 client of a server set to TLS 1.3: client %v, server %v; want both refused for the version", err, h.err)
	}
	// A rotated certificate's configuration keeps them; a change made after
	// the first handshake is ignored, at a rotation too.
	tls13.MinVersion = tls.VersionTLS12
	next := s.CA.Issue(t, testcerts.Loopback("next server"))
	next.WriteTo(t, s.Server.Cert, s.Server.Key)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	c, err := dial(t, srv.addr, old)
	if h := srv.next(t); err == nil || h.err == nil || !strings.Contains(h.err.Error(), "unsupported versions") {
		t.Errorf("after a certificate rotation, a TLS 1.2 client of a server set to TLS 1.3: client %v, server %v; want both refused for the version", err, h.err)
	}
	if c != nil {
		c.Close()
	}
	presented(t, mustDial(t, srv.addr, mustClientConfig(t, tlsfiles.Files{CA: s.CA.File})), next.Leaf, "after the rotation")
	if h := srv.next(t); h.err != nil {
		t.Fatal(h.err)
	}

	byHand := serverConfig(t, r)
	byHand.ClientAuth, byHand.ClientCAs = tls.RequireAndVerifyClientCert, mustPool(t, s.CA.PEM)
	srv = serve(t, byHand)
	_, err = dial(t, srv.addr, mustClientConfig(t, tlsfiles.Files{CA: s.CA.File}))
	if h := srv.next(t); h.err == nil || !strings.Contains(h.err.Error(), "client didn't provide a certificate") {
		t.Errorf("a client without a certificate of a server requiring one: client %v, server %v; want it refused", err, h.err)
	}
	mustDial(t, srv.addr, mustClientConfig(t, tlsfiles.Files{Cert: s.Client.Cert, Key: s.Client.Key, CA: s.CA.File}))
	if h := srv.next(t); h.err != nil || len(h.state.VerifiedChains) == 0 {
		t.Errorf("a client with a certificate of the CA: %v, %d verified chains; want it served, verified", h.err, len(h.state.VerifiedChains))
	}
}

func mustClientConfig(t *testing.T, f tlsfiles.Files) *tls.Config {
	t.Helper()
	c, err := f.ClientConfig("")
	if err != nil {
		t.Fatal(err)
	}
	return c
}
