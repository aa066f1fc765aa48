// Package tlsfiles turns certificate, key and CA files into TLS
// configurations for a server and for its clients, and keeps them fresh:
// a certificate, key or CA replaced on disk is used for new connections
// without a restart. It is Sluice's one TLS helper, for the TChannel
// channel and for the Doorman server and client alike, and imports the
// standard library and Sluice's clock package only (no gRPC, no
// tchannel-go).
//
// # Files and what they mean
//
// Files names the PEM files of one side. A server presents Cert (with
// Key); with CA set it also requires every client to present a
// certificate CA signed (mutual TLS). A client verifies the server against
// CA (the system's roots when CA is empty) and, with Cert and Key set,
// presents them. Both sides speak TLS 1.2 or later; everything else is
// crypto/tls's default.
//
// # Reloading
//
// Every file is read and checked when the configuration is made (New, or
// Files.ServerConfig and Files.ClientConfig), so a missing or bad file is
// an error at start-up that names the file. Afterwards a Reloader checks
// the files at most once per ReloadInterval (1 s by default), from the
// handshake that finds the interval over: a file whose modification time,
// size or identity (inode) changed is read again. No goroutine runs in the
// background and there is nothing to close. The check is a stat of each
// file, and a read of those that changed; concurrent handshakes never
// wait for it, they use the files loaded before. Reload reads every file
// now, changed or not (for a SIGHUP handler, say).
//
// Every file must be a regular file (a symbolic link to one will do) of at
// most 1 MiB. Anything else is an error that names the file, found
// without reading it or waiting on it: a named pipe or a device in a
// file's place cannot hold up the handshake that looks at the files, nor
// a huge file be read whole.
//
// What changed is installed only once it loads: a certificate and its key
// only as a matching pair (a new certificate beside the old key, as when
// the two are rewritten one after the other, keeps the old pair in use
// until the new key is there too) whose certificate has not expired, a CA
// file only if it holds nothing but whole certificates. A certificate
// file holds at most MaxChainCerts certificates (the certificate and its
// intermediates), at New as on a reload: every handshake would fail with
// an expired certificate or carry an absurd chain, while the one before
// still works. A file that does not load leaves the last good one in
// use, handshakes go on with it, and the error is logged at Warn on
// Config.Logger and kept by LastError until the files load again.
//
// # How each side picks up new files
//
// A server's configuration (Reloader.ServerConfig) is made once and serves
// every connection: its GetConfigForClient hands each handshake a clone
// of it for the certificate and CA in use, made at the first handshake
// after they were loaded, which presents the certificate and, with a CA,
// requires a client certificate (tls.RequireAndVerifyClientCert) that
// chains to it.
// crypto/tls verifies the client's certificate itself, as with a fixed
// configuration: the chain, the validity dates, the client-authentication
// key usage. A refused client learns why from the alert ("unknown
// certificate authority", "expired certificate"), and the
// ConnectionState's VerifiedChains hold the chains verified. A resumed
// session is checked against the CA in use too (crypto/tls does so from
// Go 1.24.13, 1.25.7 and 1.26.0, which go.mod requires).
//
// Fields set on the configuration ServerConfig returns before its first
// handshake (ALPN protocols, cipher suites, versions, a VerifyConnection
// hook) hold for every handshake; set them on it, not on a clone, whose
// GetConfigForClient still reads them from it. gRPC's credentials wrap
// GetConfigForClient and set their ALPN protocol on a clone of what it
// returns.
//
// A client's configuration (Reloader.ClientConfig) presents the current
// certificate through GetClientCertificate, but takes the CA as it is when
// the configuration is made, and lets crypto/tls verify the server with it
// unchanged. Go's client has no hook that could change the roots of a
// configuration in use; one that verified the server by hand would need
// the name the caller dialled, which tls.Dial and gRPC write into a copy
// of the configuration and which, for an IP address, no hook ever sees (no
// server name indication is sent for an IP). Rather than reimplement
// hostname checks with that hole, a client that wants a replaced CA to
// take effect calls ClientConfig for each connection it dials; the call is
// cheap (no file is read unless the interval is over and a file changed).
//
// # Peer identity
//
// IdentityOf reads the subject and alternative names of the certificate a
// peer presented, for handlers that authorise callers by identity.
package tlsfiles
