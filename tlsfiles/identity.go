package tlsfiles

import "crypto/tls"

// Identity is who a peer's certificate says the peer is: what a handler
// authorising callers by identity compares with its rules.
type Identity struct {
	// Subject is the certificate's subject as an RFC 2253 distinguished
	// name ("CN=client,O=Example").
	Subject string
	// CommonName is the subject's common name, "" when it has none.
	CommonName string
	// DNSNames are the certificate's DNS alternative names.
	DNSNames []string
	// URIs are its URI alternative names (a SPIFFE ID, say), as written.
	URIs []string
}

// IdentityOf returns the Identity of the peer's leaf certificate,
// state.PeerCertificates[0], and true; or false when state is nil, its
// handshake is not complete, or the peer presented no certificate.
//
// The certificate is verified only if the configuration verified it:
// on a server made by Reloader.ServerConfig with a CA, or Go's
// RequireAndVerifyClientCert, every client's is; on a client, the
// server's is unless InsecureSkipVerify is set. A server without a CA
// asks for no client certificate, so IdentityOf reports false for every
// client. In a VerifyConnection hook the handshake is not complete and
// IdentityOf reports false: the chain may not be verified yet.
func IdentityOf(state *tls.ConnectionState) (Identity, bool) {
	if state == nil || !state.HandshakeComplete || len(state.PeerCertificates) == 0 {
		return Identity{}, false
	}
	leaf := state.PeerCertificates[0]
	id := Identity{
		Subject:    leaf.Subject.String(),
		CommonName: leaf.Subject.CommonName,
		DNSNames:   append([]string(nil), leaf.DNSNames...),
	}
	for _, u := range leaf.URIs {
		id.URIs = append(id.URIs, u.String())
	}
	return id, true
}
