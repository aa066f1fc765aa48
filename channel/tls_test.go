package channel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/internal/tchconn"
	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/internal/testkit/tpeer"
	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/sluice-rpc/sluice/tlsfiles"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
	"github.com/uber/tchannel-go/raw"
)

// tlsTestServer is a test server ("kv": echo, get) with TLS, a "whoami"
// raw method answering the caller's verified identity, its log lines and
// its metrics.
type tlsTestServer struct {
	*testServer
	logs  logRecorder
	scope tally.TestScope
}

// startTLSServer starts a test server presenting the certificate files and
// requiring client certificates of files.CA when it is set.
func startTLSServer(t *testing.T, files tlsfiles.Files, mode TLSMode, opts ...Option) *tlsTestServer {
	t.Helper()
	r, err := tlsfiles.New(tlsfiles.Config{Files: files})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := r.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	return startTLSServerConfig(t, ServerTLS{Config: cfg, Mode: mode}, opts...)
}

func startTLSServerConfig(t *testing.T, st ServerTLS, opts ...Option) *tlsTestServer {
	t.Helper()
	s := &tlsTestServer{logs: newLogRecorder(), scope: tally.NewTestScope("", nil)}
	opts = append([]Option{WithServerTLS(st), WithScope(s.scope), WithLogger(s.logs.logger())}, opts...)
	s.testServer = startServer(t, opts...)
	if err := s.ch.RegisterRaw("whoami", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		return &RawResponse{Arg3: []byte(describeIdentity(PeerIdentity(ctx)))}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

func describeIdentity(id tlsfiles.Identity, ok bool) string {
	if !ok {
		return "anonymous"
	}
	return fmt.Sprintf("%s %v %v", id.Subject, id.DNSNames, id.URIs)
}

// clientIdentity is how describeIdentity describes testcerts' client.
var clientIdentity = fmt.Sprintf("CN=%s,O=Sluice tests [%s] [%s]", testcerts.ClientName, testcerts.ClientDNS, testcerts.ClientURI)

// warned reports whether a warning of the server's holds every one of
// parts.
func (s *tlsTestServer) warned(parts ...string) bool {
	for _, l := range s.logs.warnings() {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// clientConfig returns a ClientTLS.Config from files, with maxVersion
// (0: crypto/tls's) and the serial numbers of the server certificates
// its connections verified sent to seen, when not nil.
func clientConfig(t *testing.T, files tlsfiles.Files, maxVersion uint16, seen chan<- *big.Int) func() *tls.Config {
	t.Helper()
	r, err := tlsfiles.New(tlsfiles.Config{Files: files})
	if err != nil {
		t.Fatal(err)
	}
	return func() *tls.Config {
		c := r.ClientConfig("")
		c.MaxVersion = maxVersion
		if seen != nil {
			c.VerifyConnection = func(cs tls.ConnectionState) error {
				seen <- cs.PeerCertificates[0].SerialNumber
				return nil
			}
		}
		return c
	}
}

// startTLSClient returns a client of "kv" at hostPort with ct.
func startTLSClient(t *testing.T, hostPort string, ct ClientTLS, opts ...Option) *Channel {
	t.Helper()
	c, err := New("client", append([]Option{WithClientTLS(ct)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv", WithMethods("echo", "get", "whoami", "whoamiJSON")).AddPeer(hostPort); err != nil {
		t.Fatal(err)
	}
	return c
}

var tlsVersions = []struct {
	name string
	max  uint16
}{{"TLS 1.2", tls.VersionTLS12}, {"TLS 1.3", tls.VersionTLS13}}

// recordTLS returns an inbound middleware that records each call's
// Inbound.TLS, and a function returning what it has recorded so far.
func recordTLS() (Option, func() []*TLSInfo) {
	var (
		mu  sync.Mutex
		ins []*TLSInfo
	)
	mw := WithInboundMiddleware(func(ctx context.Context, in *Inbound, next func(context.Context) error) error {
		mu.Lock()
		ins = append(ins, in.TLS)
		mu.Unlock()
		return next(ctx)
	})
	return mw, func() []*TLSInfo {
		mu.Lock()
		defer mu.Unlock()
		return append([]*TLSInfo(nil), ins...)
	}
}

// With mutual TLS a client's raw and JSON calls are served, and the
// handlers and the inbound middleware read the client's verified
// identity: subject, DNS and URI names.
func TestTLSMutualCalls(t *testing.T) {
	certs := testcerts.New(t)
	mw, seen := recordTLS()
	s := startTLSServer(t, tlsfiles.Files{Cert: certs.Server.Cert, Key: certs.Server.Key, CA: certs.CA.File}, TLSOnly, mw)
	if err := s.ch.RegisterJSON(map[string]any{
		"whoamiJSON": func(ctx tjson.Context, _ *echoReq) (*echoRes, error) {
			return &echoRes{Key: describeIdentity(PeerIdentity(ctx))}, nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	for _, v := range tlsVersions {
		t.Run(v.name, func(t *testing.T) {
			client := startTLSClient(t, s.ch.HostPort(), ClientTLS{
				Config: clientConfig(t, tlsfiles.Files{Cert: certs.Client.Cert, Key: certs.Client.Key, CA: certs.CA.File}, v.max, nil)},
			)
			ctx := ctxTimeout(t)
			res, err := to(client, "kv").CallRaw(ctx, "echo", []byte("h"), []byte("over TLS"))
			if err != nil || string(res.Arg3) != "over TLS" {
				t.Fatalf("raw echo: %v, %v", res, err)
			}
			var got echoRes
			if err := to(client, "kv").CallJSON(ctx, "get", &echoReq{Key: "k"}, &got); err != nil || got.Key != "k" {
				t.Fatalf("JSON get: %+v, %v", got, err)
			}
			res, err = to(client, "kv").CallRaw(ctx, "whoami", nil, nil)
			if err != nil || string(res.Arg3) != clientIdentity {
				t.Errorf("the raw handler reads the identity %q (%v), want %q", res.Arg3, err, clientIdentity)
			}
			if err := to(client, "kv").CallJSON(ctx, "whoamiJSON", &echoReq{}, &got); err != nil || got.Key != clientIdentity {
				t.Errorf("the JSON handler reads the identity %q (%v), want %q", got.Key, err, clientIdentity)
			}
		})
	}
	ins := seen()
	if len(ins) != 8 {
		t.Fatalf("the middleware saw %d calls, want 8", len(ins))
	}
	for i, in := range ins {
		if in == nil || !in.Verified || in.Identity.CommonName != testcerts.ClientName ||
			!reflect.DeepEqual(in.Identity.URIs, []string{testcerts.ClientURI}) || in.State().Version != tlsVersions[i/4].max {
			t.Errorf("call %d: Inbound.TLS = %+v, want the verified client over %s", i, in, tlsVersions[i/4].name)
		}
	}
	if ins[0] != ins[1] {
		t.Error("two calls on one connection have different TLSInfo: it is not worked out once per connection")
	}
}

// A server requiring client certificates refuses a client with none, an
// untrusted one or an expired one: the client's connect fails and its
// calls fail UNAVAILABLE with the refusal as their cause; the server logs
// a line naming the client's address and why.
func TestTLSServerRefusesClients(t *testing.T) {
	certs := testcerts.New(t)
	s := startTLSServer(t, tlsfiles.Files{Cert: certs.Server.Cert, Key: certs.Server.Key, CA: certs.CA.File}, TLSOnly)
	for _, tc := range []struct {
		name     string
		files    tlsfiles.Files
		server   string // in the server's log line
		client12 string // in the client's error, TLS 1.2
		client13 string // TLS 1.3: the refusal comes after the client's handshake, at TChannel's
	}{
		{"no certificate", tlsfiles.Files{CA: certs.CA.File}, "tls: client didn't provide a certificate",
			"TLS handshake failed: remote error: tls: handshake failure",
			"TChannel handshake failed: the server refused the TLS connection: remote error: tls: certificate required"},
		{"an untrusted certificate", tlsfiles.Files{Cert: certs.UntrustedClient.Cert, Key: certs.UntrustedClient.Key, CA: certs.CA.File},
			"tls: failed to verify certificate: x509: certificate signed by unknown authority",
			"TLS handshake failed: remote error: tls: unknown certificate authority",
			"TChannel handshake failed: the server refused the TLS connection: remote error: tls: unknown certificate authority"},
		{"an expired certificate", tlsfiles.Files{Cert: certs.Expired.Cert, Key: certs.Expired.Key, CA: certs.CA.File},
			"tls: failed to verify certificate: x509: certificate has expired",
			"TLS handshake failed: remote error: tls: expired certificate",
			"TChannel handshake failed: the server refused the TLS connection: remote error: tls: expired certificate"},
	} {
		for _, v := range tlsVersions {
			t.Run(tc.name+", "+v.name, func(t *testing.T) {
				client := startTLSClient(t, s.ch.HostPort(), ClientTLS{Config: clientConfig(t, tc.files, v.max, nil)})
				if err := to(client, "kv").Connect(ctxTimeout(t)); !errors.Is(err, ErrUnavailable) {
					t.Fatalf("Connect: %v, want ErrUnavailable", err)
				}
				want := tc.client12
				if v.max == tls.VersionTLS13 {
					want = tc.client13
				}
				l := to(client, "kv").list
				if f := l.Peers()[0].LastFailure(); f == nil || !strings.Contains(f.Err.Error(), want) {
					t.Errorf("the peer's failure: %v, want %q", f, want)
				}
				_, err := to(client, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
				var ce *CallError
				if !errors.As(err, &ce) || !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), want) {
					t.Errorf("CallRaw: %v, want UNAVAILABLE saying %q", err, want)
				}
				testwait.Until(t, "the server's log line", func() bool {
					return s.warned("sluice: refused a TLS connection: its handshake failed", "remotePeer=127.0.0.1:", tc.server)
				})
			})
		}
	}
	// At least: a client may have connected again after its backoff. The
	// count follows the log line, so it is waited for too.
	testwait.Until(t, "server.conns_closed{reason=tls_handshake_failed} >= 6", func() bool {
		return taggedCounter(s.scope, stats.ServerConnsClosed, stats.TagReason, "tls_handshake_failed") >= 6
	})
}

// A server that only requests client certificates (RequireAnyClientCert)
// with a VerifyConnection hook that logs them and verifies nothing
// serves a client whose certificate an unknown authority signed; its
// handlers must not take that certificate's names for a verified
// identity: PeerIdentity reports none, Inbound.TLS says unverified.
func TestTLSLoggingHookDoesNotVerify(t *testing.T) {
	certs := testcerts.New(t)
	cert, err := tls.X509KeyPair(certs.Server.CertPEM, certs.Server.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	logged := make(chan string, 10)
	mw, seen := recordTLS()
	s := startTLSServerConfig(t, ServerTLS{Config: &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAnyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			logged <- cs.PeerCertificates[0].Subject.CommonName // logs, verifies nothing
			return nil
		},
	}}, mw)
	client := startTLSClient(t, s.ch.HostPort(), ClientTLS{
		Config: clientConfig(t, tlsfiles.Files{Cert: certs.UntrustedClient.Cert, Key: certs.UntrustedClient.Key, CA: certs.CA.File}, 0, nil)})
	res, err := to(client, "kv").CallRaw(ctxTimeout(t), "whoami", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Arg3) != "anonymous" {
		t.Errorf("PeerIdentity of a client with an untrusted certificate: %q, want none (anonymous)", res.Arg3)
	}
	if got := testwait.Recv(t, logged, "the hook's log"); got != testcerts.ClientName {
		t.Errorf("the hook saw %q, want the client's certificate", got)
	}
	if ins := seen(); len(ins) != 1 || ins[0] == nil || ins[0].Verified || ins[0].Identity.CommonName != testcerts.ClientName || len(ins[0].State().VerifiedChains) != 0 {
		t.Errorf("Inbound.TLS = %+v, want the client's certificate, unverified", ins)
	}
}

// A client refuses a server whose certificate names another host or that
// an unknown authority signed, with the reason as its calls' cause, and
// accepts a certificate for another name when told that name.
func TestTLSClientVerifiesServer(t *testing.T) {
	certs := testcerts.New(t)
	trusting := clientConfig(t, tlsfiles.Files{CA: certs.CA.File}, 0, nil)
	good := startTLSServer(t, tlsfiles.Files{Cert: certs.Server.Cert, Key: certs.Server.Key}, TLSOnly)
	wrong := startTLSServer(t, tlsfiles.Files{Cert: certs.WrongName.Cert, Key: certs.WrongName.Key}, TLSOnly)
	untrusted := startTLSServer(t, tlsfiles.Files{Cert: certs.UntrustedServer.Cert, Key: certs.UntrustedServer.Key}, TLSOnly)
	for _, tc := range []struct {
		name       string
		s          *tlsTestServer
		serverName string
		want       string // in the client's error; "" for success
	}{
		{"the right server", good, "", ""},
		{"the right server under another name", good, "wrong.example",
			"TLS handshake failed: tls: failed to verify certificate: x509: certificate is valid for localhost, not wrong.example"},
		{"a server for another name", wrong, "",
			"TLS handshake failed: tls: failed to verify certificate: x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs"},
		{"a server for another name, told that name", wrong, testcerts.WrongName, ""},
		{"an untrusted server", untrusted, "",
			"TLS handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := startTLSClient(t, tc.s.ch.HostPort(), ClientTLS{Config: trusting, ServerName: tc.serverName})
			_, err := to(client, "kv").CallRaw(ctxTimeout(t), "whoami", nil, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CallRaw: %v, want UNAVAILABLE saying %q", err, tc.want)
			}
			var ve *tls.CertificateVerificationError
			if !errors.As(err, &ve) {
				t.Errorf("errors.As(%v, *tls.CertificateVerificationError) = false", err)
			}
			testwait.Until(t, "the server's log line", func() bool {
				return tc.s.warned("sluice: refused a TLS connection", "remote error: tls: bad certificate")
			})
		})
	}
}

// A server certificate replaced on disk is presented to new connections
// within a few seconds, while a connection made before keeps working on
// the certificate it was made with.
func TestTLSServerCertificateReload(t *testing.T) {
	certs := testcerts.New(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certs.Server.WriteTo(t, certFile, keyFile)
	s := startTLSServer(t, tlsfiles.Files{Cert: certFile, Key: keyFile, CA: certs.CA.File}, TLSOnly)
	files := tlsfiles.Files{Cert: certs.Client.Cert, Key: certs.Client.Key, CA: certs.CA.File}

	seen := make(chan *big.Int, 100)
	old := startTLSClient(t, s.ch.HostPort(), ClientTLS{Config: clientConfig(t, files, 0, seen)})
	if _, err := to(old, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := testwait.Recv(t, seen, "the first handshake"); got.Cmp(certs.Server.Leaf.SerialNumber) != 0 {
		t.Fatalf("the server presented serial %v, want %v", got, certs.Server.Leaf.SerialNumber)
	}

	replacement := certs.CA.Issue(t, testcerts.Loopback("replacement server"))
	replacement.WriteTo(t, certFile, keyFile)
	replaced := time.Now()
	fresh := make(chan *big.Int, 100)
	var last time.Time
	testwait.Until(t, "a new connection to be presented the replacement certificate", func() bool {
		if time.Since(last) < 50*time.Millisecond {
			return false
		}
		last = time.Now()
		c, err := New("client", WithClientTLS(ClientTLS{Config: clientConfig(t, files, 0, fresh)}))
		if err != nil {
			t.Fatal(err)
		}
		to(c, "kv", WithMethods("echo"))
		defer c.Close()
		if err := to(c, "kv").AddPeer(s.ch.HostPort()); err != nil {
			t.Fatal(err)
		}
		if _, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil); err != nil {
			t.Fatal(err)
		}
		return testwait.Recv(t, fresh, "a new connection's handshake").Cmp(replacement.Leaf.SerialNumber) == 0
	})
	if d := time.Since(replaced); d > 5*time.Second {
		t.Errorf("the replacement was presented %v after it was written, want within a few seconds", d)
	}
	for range 3 {
		if _, err := to(old, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("still")); err != nil {
			t.Fatalf("the connection made before the replacement: %v", err)
		}
	}
	if len(seen) != 0 {
		t.Errorf("the old client made %d more handshakes, want its connection to stay", len(seen))
	}
}

// A mixed-mode port serves a TLS Sluice client, a plaintext Sluice client
// and a plain tchannel-go client; handlers tell them apart by their TLS.
func TestTLSMixedMode(t *testing.T) {
	certs := testcerts.New(t)
	s := startTLSServer(t, tlsfiles.Files{Cert: certs.Server.Cert, Key: certs.Server.Key, CA: certs.CA.File}, TLSMixed)
	hp := s.ch.HostPort()

	secure := startTLSClient(t, hp, ClientTLS{
		Config: clientConfig(t, tlsfiles.Files{Cert: certs.Client.Cert, Key: certs.Client.Key, CA: certs.CA.File}, 0, nil)})
	res, err := to(secure, "kv").CallRaw(ctxTimeout(t), "whoami", nil, nil)
	if err != nil || string(res.Arg3) != clientIdentity {
		t.Errorf("the TLS client: %q, %v; want %q", res.Arg3, err, clientIdentity)
	}

	plain, _, _ := startClient(t, s.testServer)
	res, err = to(plain, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("plaintext"))
	if err != nil || string(res.Arg3) != "plaintext" {
		t.Errorf("the plaintext Sluice client: %v, %v", res, err)
	}
	var got echoRes
	if err := to(plain, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, &got); err != nil || got.Key != "k" {
		t.Errorf("the plaintext Sluice client's JSON call: %+v, %v", got, err)
	}

	arg3, err := plainCall(t, hp, "whoami", tchannel.Raw, nil, nil)
	if err != nil || string(arg3) != "anonymous" {
		t.Errorf("the plain tchannel-go client: %q, %v; want anonymous", arg3, err)
	}
	if w := s.logs.warnings(); len(w) != 0 {
		t.Errorf("the server warned: %q", w)
	}
	if got := counter(s.scope, stats.ServerConnsPlaintext); got != 2 {
		t.Errorf("server.conns_plaintext = %d, want 2", got)
	}

	// Plaintext that is not TChannel, an HTTP health probe, is refused
	// and not counted as a plaintext client; nor is a socket that
	// connects and leaves.
	probe := tpeer.Dial(t, hp)
	probe.Send([]byte("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"))
	probe.ClosedByServer()
	tpeer.Dial(t, hp).Close()
	testwait.Until(t, "server.conns_closed to count the probe and the socket that left", func() bool {
		return taggedCounter(s.scope, stats.ServerConnsClosed, stats.TagReason, "invalid_frame") == 1 &&
			taggedCounter(s.scope, stats.ServerConnsClosed, stats.TagReason, "handshake_failed") == 1
	})
	if got := counter(s.scope, stats.ServerConnsPlaintext); got != 2 {
		t.Errorf("server.conns_plaintext = %d after an HTTP probe and a socket that left, want 2 still", got)
	}
}

// A TLS-only port refuses plaintext: a TChannel client learns why in an
// error frame that fails its handshake, and the server logs a line naming
// its address; other bytes close the connection.
func TestTLSOnlyRefusesPlaintext(t *testing.T) {
	certs := testcerts.New(t)
	s := startTLSServer(t, tlsfiles.Files{Cert: certs.Server.Cert, Key: certs.Server.Key}, TLSOnly)
	hp := s.ch.HostPort()

	p := tpeer.Dial(t, hp)
	p.Send(tframe.AppendInit(nil, tframe.InitReq, 1, tframe.Init{Version: 2, Params: tframe.InitParams("0.0.0.0:0", "tpeer")}))
	if f := p.Next(); f.Type != tframe.Error || f.Code != byte(tchannel.ErrCodeProtocol) || f.Message != errTLSOnly {
		t.Errorf("the answer to a plaintext init: %v %x %q, want a protocol error %q", f.Type, f.Code, f.Message, errTLSOnly)
	}
	p.ClosedByServer()
	testwait.Until(t, "the log line naming the plaintext client", func() bool {
		return s.warned("sluice: refused a plaintext TChannel connection on a TLS-only port", "remotePeer="+p.LocalAddr().String(),
			"the peer spoke plaintext TChannel to a TLS-only port")
	})

	ctx := ctxTimeout(t)
	_, _, _, err := raw.Call(ctx, plainClient(t, nil), hp, "kv", "echo", nil, nil)
	if err == nil || !strings.Contains(err.Error(), errTLSOnly) {
		t.Errorf("a plain tchannel-go client: %v, want %q", err, errTLSOnly)
	}
	plain, _, _ := startClient(t, s.testServer)
	_, err = to(plain, "kv").CallRaw(ctx, "echo", nil, nil)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "TChannel handshake failed: tchannel error ErrCodeProtocol: "+errTLSOnly) {
		t.Errorf("a plaintext Sluice client: %v, want UNAVAILABLE saying %q", err, errTLSOnly)
	}

	http := tpeer.Dial(t, hp)
	http.Send([]byte("GET / HTTP/1.1\r\n\r\n"))
	http.ClosedByServer()
	testwait.Until(t, "the log line naming the HTTP client", func() bool {
		return s.warned("remotePeer="+http.LocalAddr().String(), "neither TLS nor TChannel", "47 45 54")
	})
	testwait.Until(t, "server.conns_closed{reason=plaintext_refused} to count the 4 refusals", func() bool {
		return taggedCounter(s.scope, stats.ServerConnsClosed, stats.TagReason, "plaintext_refused") == 4
	})
	if s.received.Load() != 0 {
		t.Errorf("%d plaintext requests reached a handler", s.received.Load())
	}
}

// A client that prefers TLS reaches a plaintext server in plaintext only
// when its Fallback names it: at once when the server answers the TLS
// handshake with TChannel (a Sluice server), within half the connect
// timeout when it keeps silent (tchannel-go); each fallback is counted,
// and each peer's first logged. A server that answers in TLS is never reached in plaintext.
func TestTLSClientFallback(t *testing.T) {
	t.Parallel() // it waits out half a connect timeout, with the other half to spare
	certs := testcerts.New(t)
	trusting := clientConfig(t, tlsfiles.Files{CA: certs.CA.File}, 0, nil)
	sluicePlain := startServer(t)
	tchPlain := plainServer(t)
	wrongName := startTLSServer(t, tlsfiles.Files{Cert: certs.WrongName.Cert, Key: certs.WrongName.Key}, TLSMixed)

	t.Run("not allowed", func(t *testing.T) {
		c := startTLSClient(t, sluicePlain.ch.HostPort(), ClientTLS{Config: trusting})
		_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
		if want := "TLS handshake failed: the peer does not seem to speak TLS: it answered with bytes that are not TLS"; !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), want) {
			t.Errorf("CallRaw: %v, want UNAVAILABLE saying %q", err, want)
		}
	})

	for _, tc := range []struct {
		name string
		hp   string
	}{
		{"a plaintext Sluice server", sluicePlain.ch.HostPort()},
		{"a plain tchannel-go server", tchPlain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := newLogRecorder()
			scope := tally.NewTestScope("", nil)
			timeout := 2 * time.Second
			c := startTLSClient(t, tc.hp, ClientTLS{Config: trusting, Fallback: FallbackFor(tc.hp)},
				WithConnectConfig(ConnectConfig{Timeout: timeout}), WithLogger(logs.logger()), WithScope(scope))
			start := time.Now()
			for i := range 3 {
				res, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("in plaintext"))
				if err != nil || string(res.Arg3) != "in plaintext" {
					t.Fatalf("call %d: %v, %v", i, res, err)
				}
			}
			if d := time.Since(start); d > timeout {
				t.Errorf("the calls took %v, more than the connect timeout", d)
			}
			var n int
			for _, l := range logs.warnings() {
				if strings.Contains(l, "sluice: a peer does not speak TLS; connecting in plaintext") && strings.Contains(l, "remotePeer="+tc.hp) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d fallback lines, want 1: %q", n, logs.warnings())
			}
			if n := taggedCounter(scope, stats.PeerTLSFallbacks, stats.TagPeer, tc.hp); n != 1 {
				t.Errorf("peer.tls_fallbacks = %d, want 1 (one connection)", n)
			}
		})
	}

	t.Run("a TLS server that fails the handshake", func(t *testing.T) {
		hp := wrongName.ch.HostPort()
		c := startTLSClient(t, hp, ClientTLS{Config: trusting, Fallback: FallbackFor(hp)})
		_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
		if want := "doesn't contain any IP SANs"; !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), want) {
			t.Errorf("CallRaw: %v, want UNAVAILABLE saying %q", err, want)
		}
		if wrongName.received.Load() != 0 {
			t.Error("the call reached the server in plaintext")
		}
	})
}

// A peer that Fallback names but that has completed a TLS handshake with
// the Channel is never reached in plaintext again. Once it has served TLS,
// a connect it leaves unanswered (a server slow, overloaded, at its
// connection cap or draining) fails and is retried in TLS; it is not
// taken for a plaintext server, as it was before: after half the connect
// timeout the client fell back, and this TLSMixed server served it in
// plaintext, the caller anonymous.
func TestTLSClientNoFallbackOnceTLS(t *testing.T) {
	t.Parallel() // it waits out a connect timeout and a backoff
	certs := testcerts.New(t)
	s := startTLSServer(t, tlsfiles.Files{Cert: certs.Server.Cert, Key: certs.Server.Key, CA: certs.CA.File}, TLSMixed)
	proxy := testnet.StartProxy(t, s.ch.HostPort())
	hp := proxy.Addr()
	logs := newLogRecorder()
	scope := tally.NewTestScope("", nil)
	c := startTLSClient(t, hp, ClientTLS{
		Config:   clientConfig(t, tlsfiles.Files{Cert: certs.Client.Cert, Key: certs.Client.Key, CA: certs.CA.File}, 0, nil),
		Fallback: FallbackFor(hp),
	}, WithConnectConfig(ConnectConfig{Timeout: time.Second}), WithScope(scope), WithLogger(logs.logger()))
	whoami := func() (string, error) {
		res, err := to(c, "kv").CallRaw(ctxTimeout(t), "whoami", nil, nil)
		if err != nil {
			return "", err
		}
		return string(res.Arg3), nil
	}
	if got, err := whoami(); err != nil || got != clientIdentity {
		t.Fatalf("over TLS: %q, %v; want %q", got, err, clientIdentity)
	}

	// The next connect is held unanswered; the one after, on the
	// connect backoff, is forwarded.
	proxy.HoldNext(1)
	proxy.Cut()
	testwait.Until(t, "a call on a new connection", func() bool {
		got, err := whoami()
		if err == nil && got != clientIdentity {
			t.Fatalf("after the stall, the server saw the caller as %q: reached in plaintext", got)
		}
		return err == nil
	})
	l := to(c, "kv").list
	want := []string{"TLS handshake failed: it accepted the TCP connection and said nothing for ",
		"; not reached in plaintext, as it has completed a TLS handshake with this Channel before"}
	if f := l.Peers()[0].LastFailure(); f == nil || !strings.Contains(f.Err.Error(), want[0]) || !strings.Contains(f.Err.Error(), want[1]) {
		t.Errorf("the peer's last failure: %v, want %q", f, want)
	}
	if n := taggedCounter(scope, stats.PeerTLSFallbacks, stats.TagPeer, hp); n != 0 {
		t.Errorf("peer.tls_fallbacks = %d, want 0", n)
	}
	if n := counter(s.scope, stats.ServerConnsPlaintext); n != 0 {
		t.Errorf("server.conns_plaintext = %d, want 0", n)
	}
	for _, l := range logs.warnings() {
		if strings.Contains(l, "connecting in plaintext") {
			t.Errorf("the client fell back: %q", l)
		}
	}
}

// plainServer starts a plain tchannel-go server of "kv" echoing raw calls,
// and returns its address.
func plainServer(t *testing.T) string {
	t.Helper()
	ch, err := tchannel.NewChannel("kv", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	ch.Register(raw.Wrap(rawEcho{}), "echo")
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return ch.PeerInfo().HostPort
}

type rawEcho struct{}

func (rawEcho) Handle(_ context.Context, a *raw.Args) (*raw.Res, error) {
	return &raw.Res{Arg2: a.Arg2, Arg3: a.Arg3}, nil
}
func (rawEcho) OnError(context.Context, error) {}

// The options' errors name the field and the rule.
func TestTLSOptionsValidate(t *testing.T) {
	certs := testcerts.New(t)
	good, err := tlsfiles.Files{Cert: certs.Server.Cert, Key: certs.Server.Key}.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	old := good.Clone()
	old.MinVersion = tls.VersionTLS11
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithServerTLS(ServerTLS{}), "channel: ServerTLS.Config is nil"},
		{WithServerTLS(ServerTLS{Config: &tls.Config{}}), "channel: ServerTLS.Config.Certificates is empty, must hold a certificate"},
		{WithServerTLS(ServerTLS{Config: old}), "channel: ServerTLS.Config.MinVersion is TLS 1.1, must be TLS 1.2 or later"},
		{WithServerTLS(ServerTLS{Config: good, Mode: 7}), "channel: ServerTLS.Mode is TLSMode(7), must be TLSOnly or TLSMixed"},
		{WithClientTLS(ClientTLS{}), "channel: ClientTLS.Config is nil"},
		{WithClientTLS(ClientTLS{Config: func() *tls.Config { return nil }}), "channel: ClientTLS.Config is a function returning nil, must return a TLS configuration"},
		{WithClientTLS(ClientTLS{Config: func() *tls.Config { return &tls.Config{MinVersion: tls.VersionTLS10} }}),
			"channel: ClientTLS.Config is a function returning MinVersion TLS 1.0, must return MinVersion TLS 1.2 or later"},
	} {
		c, err := New("x", tc.opt)
		if err == nil {
			c.Close()
		}
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("New: %v, want %q", err, tc.want)
		}
	}
	if m := TLSMixed.String(); m != "TLSMixed" {
		t.Errorf("TLSMixed.String() = %q", m)
	}
}

// Verified is what crypto/tls verified in the handshake, whatever the
// configuration suggests: a certificate a server only requested, or a
// client's with InsecureSkipVerify, is not verified even with a hook of
// the configuration's own (the Channel cannot tell a hook that verifies
// from one that only logs); a server whose GetConfigForClient returns a
// verifying configuration verifies.
func TestTLSVerifies(t *testing.T) {
	certs := testcerts.New(t)
	pair := func(p testcerts.Pair) []tls.Certificate {
		c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{c}
	}
	pool := x509.NewCertPool()
	pool.AddCert(certs.CA.Cert)
	server, client := pair(certs.Server), pair(certs.Client)
	hook := func(tls.ConnectionState) error { return nil }
	verifying := &tls.Config{Certificates: server, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	for _, tc := range []struct {
		name   string
		srv    *tls.Config
		cli    *tls.Config
		client bool // the client's Verified, else the server's
		want   bool
	}{
		{"server, no client certificate asked", &tls.Config{Certificates: server}, nil, false, false},
		{"server, RequestClientCert", &tls.Config{Certificates: server, ClientAuth: tls.RequestClientCert}, nil, false, false},
		{"server, RequireAnyClientCert", &tls.Config{Certificates: server, ClientAuth: tls.RequireAnyClientCert}, nil, false, false},
		// Verified before finding 1: a hook was taken to verify.
		{"server, RequireAnyClientCert and a hook", &tls.Config{Certificates: server, ClientAuth: tls.RequireAnyClientCert, VerifyConnection: hook}, nil, false, false},
		{"server, VerifyClientCertIfGiven", &tls.Config{Certificates: server, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool}, nil, false, true},
		{"server, RequireAndVerifyClientCert", verifying, nil, false, true},
		// Unverified before finding 1: the outer configuration asks for no certificate.
		{"server, GetConfigForClient verifying", &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return verifying, nil }}, nil, false, true},
		{"client", nil, &tls.Config{RootCAs: pool}, true, true},
		{"client, InsecureSkipVerify", nil, &tls.Config{InsecureSkipVerify: true}, true, false},
		// Verified before finding 1: a hook was taken to verify.
		{"client, InsecureSkipVerify and a hook", nil, &tls.Config{InsecureSkipVerify: true, VerifyConnection: hook}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := tc.srv, tc.cli
			if srv == nil {
				srv = &tls.Config{Certificates: server}
			}
			if cli == nil {
				cli = &tls.Config{RootCAs: pool, Certificates: client}
			}
			cli = cli.Clone()
			cli.ServerName = "localhost"
			sstate, cstate := handshakeOverPipe(t, srv, cli)
			info := newTLSInfo(sstate)
			if tc.client {
				info = newTLSInfo(cstate)
			}
			// The peer presented a certificate, but where none was asked.
			asked := tc.client || srv.ClientAuth != tls.NoClientCert || srv.GetConfigForClient != nil
			if info.Verified != tc.want || (info.Identity.CommonName != "") != asked {
				t.Errorf("Verified %v, identity %q; want %v, and the peer's identity if it presented a certificate", info.Verified, info.Identity.CommonName, tc.want)
			}
		})
	}
}

// handshakeOverPipe runs a TLS handshake between srv and cli over a pipe
// and returns both sides' states, failing the test if either fails.
func handshakeOverPipe(t *testing.T, srv, cli *tls.Config) (server, client tls.ConnectionState) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	deadline := time.Now().Add(testwait.Limit)
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	sc, cc := tls.Server(a, srv), tls.Client(b, cli)
	done := make(chan error, 1)
	go func() { done <- sc.Handshake() }()
	if err := cc.Handshake(); err != nil {
		t.Fatalf("the client's handshake: %v", err)
	}
	if err := testwait.Recv(t, done, "the server's handshake"); err != nil {
		t.Fatalf("the server's handshake: %v", err)
	}
	return sc.ConnectionState(), cc.ConnectionState()
}

// Finding a call's TLS allocates nothing, over TLS or not: the info is
// the connection's, made once in its handshake.
func TestTLSInfoOfAllocatesNothing(t *testing.T) {
	g, err := tchconn.New(tchconn.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	info := &TLSInfo{Verified: true}
	secure := g.Client(&tlsConn{Conn: tls.Client(a, &tls.Config{}), raw: a, info: info})
	plain := g.Client(&prefixConn{Conn: b})
	for _, tc := range []struct {
		name string
		nc   net.Conn
		want *TLSInfo
	}{{"TLS", secure, info}, {"plaintext", plain, nil}} {
		if got := tlsInfoOf(tc.nc); got != tc.want {
			t.Errorf("%s: tlsInfoOf = %p, want %p", tc.name, got, tc.want)
		}
		if n := testing.AllocsPerRun(100, func() { tlsInfoOf(tc.nc) }); n != 0 {
			t.Errorf("%s: tlsInfoOf allocates %v times, want 0", tc.name, n)
		}
	}
}

// The gate closes what is not a TLS or TChannel handshake finished in
// time, on a TLS-only and a mixed port: a silent socket, one byte, a TLS
// record header then silence (each at the handshake timeout), and a TLS
// record of garbage (at once); each counted under its reason.
func TestTLSGateClosesStalledAndBrokenHandshakes(t *testing.T) {
	t.Parallel() // each mode waits out three handshake timeouts
	certs := testcerts.New(t)
	for _, mode := range []TLSMode{TLSOnly, TLSMixed} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			s := startTLSServer(t, tlsfiles.Files{Cert: certs.Server.Cert, Key: certs.Server.Key}, mode,
				WithPeerLimits(PeerLimits{HandshakeTimeout: 300 * time.Millisecond}))
			for _, tc := range []struct {
				name   string
				send   []byte
				reason string
			}{
				{"nothing", nil, "handshake_timeout"},
				{"one byte", []byte{0x16}, "handshake_timeout"},
				{"a record header, then silence", []byte{0x16, 0x03, 0x01, 0x00, 0x40}, "handshake_timeout"},
				{"a record of garbage", append([]byte{0x16, 0x03, 0x01, 0x00, 0x64}, make([]byte, 100)...), "tls_handshake_failed"},
			} {
				before := taggedCounter(s.scope, stats.ServerConnsClosed, stats.TagReason, tc.reason)
				c, err := net.Dial("tcp", s.ch.HostPort())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.Write(tc.send); err != nil {
					t.Fatal(err)
				}
				// The server must close it: our own deadline is far past its.
				c.SetReadDeadline(time.Now().Add(testwait.Limit))
				_, err = io.Copy(io.Discard, c)
				c.Close()
				if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("%s: the server kept the connection open for %v", tc.name, testwait.Limit)
				}
				testwait.Until(t, tc.name+": counted as "+tc.reason, func() bool {
					return taggedCounter(s.scope, stats.ServerConnsClosed, stats.TagReason, tc.reason) == before+1
				})
			}
		})
	}
}

// A TLS peer that accepts TCP and never answers the handshake fails the
// connect within the connect timeout, with or without Fallback (which
// makes one plaintext dial more, no more), and the call fails UNAVAILABLE
// saying why instead of hanging.
func TestTLSClientBlackHole(t *testing.T) {
	t.Parallel() // its subtests wait out a connect timeout each
	certs := testcerts.New(t)
	trusting := clientConfig(t, tlsfiles.Files{CA: certs.CA.File}, 0, nil)
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprint("fallback=", fallback), func(t *testing.T) {
			t.Parallel() // each waits out its connect timeout
			hole := testnet.BlackHole(t)
			ct := ClientTLS{Config: trusting}
			if fallback {
				ct.Fallback = FallbackFor(hole.Addr())
			}
			// With Fallback the TLS handshake has half the connect
			// timeout, and falls back only if it fails within the whole:
			// a second leaves room for a loaded machine's pauses. The
			// backoff keeps the connector from dialing again during the
			// test, so the dials counted are the connect's alone.
			scope := tally.NewTestScope("", nil)
			c := startTLSClient(t, hole.Addr(), ct, WithScope(scope), WithConnectConfig(ConnectConfig{Timeout: time.Second,
				Backoff: backoff.Exponential{Initial: time.Minute, Max: time.Minute, Multiplier: 1, Jitter: backoff.ProportionalJitter}}))
			if err := to(c, "kv").Connect(ctxTimeout(t)); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Connect: %v, want ErrUnavailable", err)
			}
			want := int64(1)
			if fallback {
				want = 2 // the TLS dial, then one plaintext dial
				if n := taggedCounter(scope, stats.PeerTLSFallbacks, stats.TagPeer, hole.Addr()); n != 1 {
					t.Fatalf("%d fallbacks to plaintext, want 1", n)
				}
			}
			// The hole counts a connection when its accept loop takes it,
			// which can be after Connect has returned.
			testwait.Until(t, fmt.Sprintf("the black hole to accept %d connections", want), func() bool { return hole.Accepts() >= want })
			if got := hole.Accepts(); got != want {
				t.Fatalf("%d connections to the black hole for one connect, want %d", got, want)
			}
			_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "the last connection failure, to "+hole.Addr()) {
				t.Fatalf("CallRaw: %v, want UNAVAILABLE naming the connection that failed", err)
			}
		})
	}
}
