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
// IdentityOf does not say whether the certificate was verified:
// crypto/tls verified it when state.VerifiedChains is not empty, as it is
// for every client of a server made by Reloader.ServerConfig with a CA
// (or any with tls.RequireAndVerifyClientCert), and for the server of a
// client without InsecureSkipVerify. A certificate a server only
// requested (tls.RequireAnyClientCert) is not verified: anyone can
// present one. A server without a CA asks for no client certificate, so
// IdentityOf reports false for every client. In a VerifyConnection hook
// the handshake is not complete and IdentityOf reports false.
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
