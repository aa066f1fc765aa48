package tlsfiles_test

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
	"github.com/sluice-rpc/sluice/tlsfiles"
)

// IdentityOf has nothing to say of a connection without a verified
// certificate. (The identities of real handshakes: TestMutualTLS.)
func TestIdentityOfNothing(t *testing.T) {
	s := testcerts.New(t)
	for _, tc := range []struct {
		name  string
		state *tls.ConnectionState
	}{
		{"nil", nil},
		{"no certificate", &tls.ConnectionState{HandshakeComplete: true}},
		{"a handshake in progress", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{s.Client.Leaf}}},
	} {
		if id, ok := tlsfiles.IdentityOf(tc.state); ok {
			t.Errorf("%s: identity %+v", tc.name, id)
		}
	}
	id, ok := tlsfiles.IdentityOf(&tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{s.Client.Leaf}})
	if !ok || id.CommonName != testcerts.ClientName {
		t.Errorf("identity %+v, %v", id, ok)
	}
	// The identity is a copy: changing it changes no certificate.
	id.DNSNames[0] = "changed"
	if s.Client.Leaf.DNSNames[0] != testcerts.ClientDNS {
		t.Error("IdentityOf returned the certificate's own slice")
	}
}
