package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	tthrift "github.com/uber/tchannel-go/thrift"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/tlsfiles"
)

// mutualTLS are the flags of a client presenting certs' client
// certificate and verifying the server against its CA.
func mutualTLS(certs testcerts.Set) []string {
	return []string{"--tls-ca", certs.CA.File, "--tls-cert", certs.Client.Cert, "--tls-key", certs.Client.Key}
}

// serveTLSArgs are sluice serve's flags for certs' server certificate,
// requiring client certificates of its CA.
func serveTLSArgs(certs testcerts.Set) []string {
	return []string{"--tls-cert", certs.Server.Cert, "--tls-key", certs.Server.Key, "--tls-ca", certs.CA.File}
}

// A mutual-TLS sluice serve answers a call presenting a client
// certificate its CA signed, JSON and raw, and refuses the others, each
// with an error on stderr that says why: no client certificate, a server
// certificate for another name, an untrusted CA, a plaintext client.
func TestTLSServeAndCall(t *testing.T) {
	t.Parallel()
	certs := testcerts.New(t)
	addr, serveErr := startServeStderr(t, serveTLSArgs(certs)...)
	target := []string{"-p", addr, "-s", "echo", "-m", "echo"}

	code, out, errOut := runCall(append(append(target, mutualTLS(certs)...), "-r", `{"a":1}`)...)
	if code != 0 || out != "{\"a\":1}\n" || errOut != "" {
		t.Fatalf("mutual TLS JSON call: exit %d, stdout %q, stderr %q; want 0 and the body", code, out, errOut)
	}
	code, out, errOut = runCall(append(append(target, mutualTLS(certs)...), "-e", "raw", "-r", "hello")...)
	if code != 0 || out != "hello\n" || errOut != "" {
		t.Fatalf("mutual TLS raw call: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The server's certificate is for 127.0.0.1 and localhost.
	code, out, errOut = runCall(append(append(target, mutualTLS(certs)...), "--tls-server-name", "localhost")...)
	if code != 0 || out != "{}\n" {
		t.Fatalf("--tls-server-name localhost: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no client certificate", []string{"--tls-ca", certs.CA.File},
			"the server refused the TLS connection: remote error: tls: certificate required"},
		{"the wrong server name", append(mutualTLS(certs), "--tls-server-name", "wrong.example"),
			"certificate is valid for localhost, not wrong.example"},
		{"an untrusted server", []string{"--tls-ca", certs.Untrusted.File, "--tls-cert", certs.Client.Cert, "--tls-key", certs.Client.Key},
			"certificate signed by unknown authority"},
		{"plaintext", nil, "this port accepts TLS connections only"},
	} {
		code, out, errOut := runCall(append(target, tc.args...)...)
		if code != ExitFail || out != "" || !strings.Contains(errOut, "UNAVAILABLE") || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d and %q", tc.name, code, out, errOut, ExitFail, tc.want)
		}
	}
	// The server names each client it refused, and why.
	for _, want := range []string{"tls: client didn't provide a certificate", "(plaintext_refused)"} {
		testwait.Until(t, "sluice serve's stderr to say "+want, func() bool { return strings.Contains(serveErr.String(), want) })
	}
}

// On a --tls-mode mixed port, plaintext and TLS calls both succeed.
func TestTLSServeMixed(t *testing.T) {
	t.Parallel()
	certs := testcerts.New(t)
	addr := startServe(t, "--tls-cert", certs.Server.Cert, "--tls-key", certs.Server.Key, "--tls-mode", "mixed")
	for _, args := range [][]string{nil, {"--tls-ca", certs.CA.File}} {
		code, out, errOut := runCall(append([]string{"-p", addr, "-s", "echo", "-m", "echo", "-r", `{"k":"v"}`}, args...)...)
		if code != 0 || out != "{\"k\":\"v\"}\n" {
			t.Errorf("call %q to a mixed port: exit %d, stdout %q, stderr %q; want 0", args, code, out, errOut)
		}
	}
}

// --tls-fallback reaches a plaintext server in plaintext, and says so on
// stderr; without it, a TLS call to a plaintext server fails saying why.
func TestTLSFallback(t *testing.T) {
	t.Parallel()
	certs := testcerts.New(t)
	addr := startServe(t)
	code, out, errOut := runCall("-p", addr, "-s", "echo", "-m", "echo", "--tls-ca", certs.CA.File, "--tls-fallback")
	if code != 0 || out != "{}\n" || !strings.Contains(errOut, "sluice: a peer does not speak TLS; connecting in plaintext") {
		t.Fatalf("--tls-fallback to a plaintext server: exit %d, stdout %q, stderr %q; want 0 and the fallback on stderr", code, out, errOut)
	}
	code, out, errOut = runCall("-p", addr, "-s", "echo", "-m", "echo", "--tls-ca", certs.CA.File)
	if code != ExitFail || out != "" || !strings.Contains(errOut, "the peer does not seem to speak TLS") {
		t.Fatalf("TLS to a plaintext server: exit %d, stdout %q, stderr %q; want 1 and why", code, out, errOut)
	}
}

// bench speaks TLS to its peers with the same flags.
func TestTLSBench(t *testing.T) {
	t.Parallel()
	certs := testcerts.New(t)
	addr := startServe(t, serveTLSArgs(certs)...)
	args := append([]string{"-p", addr, "-s", "echo", "-m", "echo", "-n", "20", "--warmup", "0", "--connections", "2", "-o", "json"}, mutualTLS(certs)...)
	code, out, errOut := runBench(t, context.Background(), args...)
	var rep benchJSON
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Calls != 20 || rep.OK != 20 {
		t.Fatalf("bench over mutual TLS: exit %d, report %+v, stderr %q; want 20 calls, all ok", code, rep, errOut)
	}
	// Without a client certificate every call is refused.
	code, _, errOut = runBench(t, context.Background(), "-p", addr, "-s", "echo", "-m", "echo", "-n", "5", "--warmup", "0", "--tls-ca", certs.CA.File)
	if code != ExitFail || !strings.Contains(errOut, "no call succeeded") {
		t.Fatalf("bench without a client certificate: exit %d, stderr %q; want 1", code, errOut)
	}
}

// kvStore is a KeyValue handler: Get answers "value of KEY".
type kvStore struct{}

func (kvStore) Get(_ tthrift.Context, key string) (string, error) { return "value of " + key, nil }
func (kvStore) Set(tthrift.Context, string, string) error         { return nil }
func (kvStore) HealthCheck(tthrift.Context) (string, error)       { return "ok", nil }

// A Thrift call (-t) over mutual TLS, to a Sluice server of
// tchannel-go's KeyValue example.
func TestTLSThriftCall(t *testing.T) {
	t.Parallel()
	certs := testcerts.New(t)
	cfg, err := tlsfiles.Files{Cert: certs.Server.Cert, Key: certs.Server.Key, CA: certs.CA.File}.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := channel.New("keyvalue", channel.WithServerTLS(channel.ServerTLS{Config: cfg}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	tthrift.NewServer(ch.TChannel()).Register(keyvalue.NewTChanKeyValueServer(kvStore{}))
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-p", ch.HostPort(), "-t", keyvalueIDL(t), "keyvalue", "KeyValue::Get", "-r", `{"key":"a"}`}, mutualTLS(certs)...)
	code, out, errOut := runCall(args...)
	if code != 0 || !strings.Contains(out, `"result": "value of a"`) {
		t.Fatalf("Thrift call over mutual TLS: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCall(append([]string{"-p", ch.HostPort(), "--health", "keyvalue"}, mutualTLS(certs)...)...)
	if code != 0 {
		t.Fatalf("--health over mutual TLS: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// The TLS flags' usage errors name the flag, and the file that does not
// load. testdata/exitcodes.txt has more of them, checked for exit 2 only.
func TestTLSFlagErrors(t *testing.T) {
	t.Parallel()
	certs := testcerts.New(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--tls-cert", certs.Server.Cert}, "sluice serve: --tls-cert needs --tls-key, the PEM file of its private key\n"},
		{[]string{"serve", "--tls-key", certs.Server.Key}, "sluice serve: --tls-key needs --tls-cert"},
		{[]string{"serve", "--tls-ca", certs.CA.File}, "sluice serve: --tls-ca (client certificates) needs --tls-cert and --tls-key"},
		{[]string{"serve", "--tls-mode", "mixed"}, "sluice serve: --tls-mode says what a TLS port does with plaintext clients: give --tls-cert and --tls-key too"},
		{[]string{"serve", "--tls-cert", certs.Server.Cert, "--tls-key", certs.Server.Key, "--tls-mode", "sometimes"}, `--tls-mode is "sometimes", must be only or mixed`},
		{[]string{"serve", "--tls-cert", "/nonexistent/s.pem", "--tls-key", certs.Server.Key},
			"sluice serve: --tls-cert/--tls-key: tlsfiles: reading certificate: open /nonexistent/s.pem: no such file or directory"},
		{[]string{"serve", "--tls-cert", certs.Server.Cert, "--tls-key", certs.Client.Key, "--tls-ca", certs.CA.File},
			"--tls-cert/--tls-key: tlsfiles: certificate " + `"` + certs.Server.Cert + `" and key "` + certs.Client.Key + `": tls: private key does not match public key`},
		{[]string{"serve", "--tls-cert", certs.Server.Cert, "--tls-key", certs.Server.Key, "--tls-ca", certs.Server.Key},
			"--tls-ca: tlsfiles: CA " + `"` + certs.Server.Key + `": block 1 is a "PRIVATE KEY"`},
		{[]string{"call", "-p", "127.0.0.1:1", "-s", "echo", "-m", "echo", "--tls-ca", "/nonexistent/ca.pem"},
			"sluice call: --tls-ca: tlsfiles: reading CA: open /nonexistent/ca.pem: no such file or directory"},
		{[]string{"call", "-p", "127.0.0.1:1", "-s", "echo", "-m", "echo", "--tls-cert", certs.Client.Cert}, "sluice call: --tls-cert needs --tls-key"},
		{[]string{"call", "-p", "127.0.0.1:1", "-s", "echo", "-m", "echo", "--tls-cert", certs.Client.Cert, "--tls-key", "/nonexistent/k.pem"},
			"sluice call: --tls-cert/--tls-key: tlsfiles: reading key: open /nonexistent/k.pem"},
		{[]string{"call", "-p", "127.0.0.1:1", "-s", "echo", "-m", "echo", "--tls-server-name", "localhost"},
			"sluice call: --tls-server-name is the name a TLS server's certificate must carry: give --tls or --tls-ca too"},
		{[]string{"call", "-p", "127.0.0.1:1", "-s", "echo", "-m", "echo", "--tls-fallback"},
			"sluice call: --tls-fallback lets TLS fall back to plaintext: give --tls or --tls-ca too"},
		{[]string{"bench", "-p", "127.0.0.1:1", "-s", "echo", "-m", "echo", "--tls-ca", certs.Client.Key},
			"sluice bench: --tls-ca: tlsfiles: CA"},
		{[]string{"bench", "-p", "127.0.0.1:1", "-s", "echo", "-m", "echo", "--tls-server-name", "localhost"}, "sluice bench: --tls-server-name is the name"},
		{[]string{"bench", "--embedded", "1", "--tls"}, "sluice bench: --embedded servers speak plaintext: the TLS flags need -p or -P peers"},
		{[]string{"bench", "--closed-loop", "--tls-ca", certs.CA.File}, "sluice bench: --closed-loop sets its own servers, load and client; drop --tls-ca"},
		{[]string{"bench", "--rolling-deploy", "--tls"}, "sluice bench: bench --rolling-deploy (it may embed an etcd server) is in sluice-lab"},
		{[]string{"bench", "--balancing", "shard", "--tls-cert", certs.Client.Cert}, "sluice bench: --balancing sets its own servers, load and client; drop --tls-cert"},
		{[]string{"demo", "--tls"}, "sluice demo: flag provided but not defined: -tls"},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != ExitUsage || out.Len() > 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("sluice %q: exit %d, stdout %q, stderr %q; want %d and %q", tc.args, code, out.String(), errOut.String(), ExitUsage, tc.want)
		}
	}
}

// call's and bench's help give the TLS flags and an example.
func TestTLSHelp(t *testing.T) {
	for cmd, example := range map[string]string{
		"serve": "sluice serve --listen 127.0.0.1:4040 --tls-cert s.pem --tls-key s-key.pem --tls-ca ca.pem --tls-mode mixed",
		"call":  "sluice call -p 127.0.0.1:4040 --tls-ca ca.pem --tls-cert c.pem --tls-key c-key.pem ",
		"bench": "sluice bench -p 127.0.0.1:4040 --tls-ca ca.pem --tls-cert c.pem --tls-key c-key.pem ",
	} {
		var out, errOut bytes.Buffer
		run([]string{cmd, "-h"}, &out, &errOut)
		flags := []string{"      --tls-cert FILE ", "      --tls-key FILE ", "      --tls-ca FILE ", "re-read"}
		if cmd == "serve" {
			flags = append(flags, "      --tls-mode MODE ", "(default only)")
		} else {
			flags = append(flags, "      --tls ", "      --tls-server-name NAME ", "      --tls-fallback ", "downgrade")
		}
		for _, want := range append(flags, example) {
			if !strings.Contains(out.String(), want) {
				t.Errorf("sluice %s -h lacks %q", cmd, want)
			}
		}
	}
}
