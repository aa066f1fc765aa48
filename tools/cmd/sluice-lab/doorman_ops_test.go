package main

import (
	"bytes"
	"context"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/leasing"
	"github.com/sluice-rpc/sluice/tools/internal/testkit/testhttp"
)

// opsServer is a Doorman server started as `doorman serve` starts one
// with the operations flags.
type opsServer struct {
	addr, debugAddr string
	stderr          *syncBuffer
}

// startOpsServer runs `sluice-lab doorman serve` with args, the configuration
// config (a file, or etcd:KEY in the cluster at endpoints), a listener and
// a debug listener on 127.0.0.1, until the test ends.
func startOpsServer(t *testing.T, args []string, config, endpoints string) *opsServer {
	t.Helper()
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--debug-listen", "127.0.0.1:0", "--config", config}, args...)
	if endpoints != "" {
		args = append(args, "--etcd", endpoints)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &opsServer{stderr: &syncBuffer{}}
	var out syncBuffer
	exit := make(chan int, 1)
	go func() { exit <- doormanRun(ctx, args, &out, o.stderr) }()
	t.Cleanup(func() {
		cancel()
		if code := testwait.Recv(t, exit, "sluice-lab doorman serve to exit"); code != 0 {
			t.Errorf("sluice-lab doorman serve exited %d: %s", code, o.stderr.String())
		}
	})
	serving := regexp.MustCompile(`serving \d+ templates on (\S+)`)
	debugging := regexp.MustCompile(`debug endpoints on http://(\S+)/`)
	testwait.Until(t, "sluice-lab doorman serve to listen", func() bool {
		if m := serving.FindStringSubmatch(out.String()); m != nil {
			o.addr = m[1]
		}
		if m := debugging.FindStringSubmatch(o.stderr.String()); m != nil {
			o.debugAddr = m[1]
		}
		return (o.addr != "" && o.debugAddr != "") || len(exit) > 0
	})
	if o.addr == "" || o.debugAddr == "" {
		t.Fatalf("sluice-lab doorman serve failed: %s", o.stderr.String())
	}
	return o
}

// lease asks the server at addr for 200 of "db" as `doorman get` does
// with the TLS flags args, and returns the capacity it got.
func lease(t *testing.T, addr string, args ...string) (float64, error) {
	t.Helper()
	return leaseWith(t, addr, testDialOptions(t, io.Discard, args...))
}

// dialOptions returns the dial options `doorman get` makes of the TLS
// flags args, telling stderr of a changed file that does not load.
func testDialOptions(t *testing.T, stderr io.Writer, args ...string) []grpc.DialOption {
	t.Helper()
	fs := cli.NewFlagSet("sluice-lab doorman get", doormanGetHelp, io.Discard, stderr)
	tf := addDoormanClientTLSFlags(fs)
	if _, ok := fs.ParseArgs(args); !ok {
		t.Fatalf("parse %q failed", args)
	}
	opts, err := dialOptions(tf, fs.TLSReloadErrors())
	if err != nil {
		t.Fatal(err)
	}
	return opts
}

// leaseWith asks the server at addr for 200 of "db", dialling with opts,
// and returns the capacity it got.
func leaseWith(t *testing.T, addr string, opts []grpc.DialOption) (float64, error) {
	t.Helper()
	cl, err := leasing.NewClient(leasing.ClientConfig{Addr: addr, ID: "ops-test", ManualRefresh: true, DialOptions: opts,
		RPCTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, err := cl.Resource("db", leasing.ResourceConfig{Wants: 200, Mode: leasing.Pessimistic})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Refresh(ctx); err != nil {
		return 0, err
	}
	c, _, ok := res.Lease()
	if !ok {
		t.Fatal("no lease")
	}
	return c, nil
}

func opsConfig(capacity string) string {
	return strings.Replace(testDoormanConfig, "capacity: 100", "capacity: "+capacity, 1)
}

// TLS on a real listener with certificates made here: a client trusting
// the CA gets its lease, one trusting another CA or speaking plaintext is
// refused; the configuration file's change is applied while the server
// runs; the RPCs and the reload are on /metrics, the state on /status.
func TestDoormanOpsTLSReloadMetrics(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	certs := testcerts.New(t)
	file := writeConfig(t, testDoormanConfig)
	s := startOpsServer(t, []string{"--tls-cert", certs.Server.Cert, "--tls-key", certs.Server.Key, "--config-poll", "10ms"}, file, "")

	if got, err := lease(t, s.addr, "--tls-ca", certs.CA.File); err != nil || got != 100 {
		t.Fatalf("a client trusting the CA: %v, %v; want 100", got, err)
	}
	if _, err := lease(t, s.addr, "--tls-ca", certs.Untrusted.File); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("a client trusting another CA: %v", err)
	}
	if _, err := lease(t, s.addr); err == nil {
		t.Error("a plaintext client got a lease from a TLS server")
	}
	var out, errOut bytes.Buffer
	if code := doormanRun(context.Background(), []string{"get", "--server", s.addr, "--tls-ca", certs.CA.File, "--resource", "db", "--wants", "30"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "resource=db wants=30 capacity=30") {
		t.Errorf("sluice-lab doorman get --tls-ca: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	load := []string{"load", "--server", s.addr, "--resource", "load-only", "--clients", "5", "--duration", "100ms", "--conns", "1", "--concurrency", "2"}
	if code := doormanRun(context.Background(), append(load, "--tls-ca", certs.CA.File), &out, &errOut); code != 0 || !strings.Contains(out.String(), "failed 0") {
		t.Errorf("sluice-lab doorman load --tls-ca: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if code := doormanRun(ctx, load, io.Discard, io.Discard); code != 1 {
		t.Errorf("sluice-lab doorman load in plaintext against a TLS server: exit %d, want 1", code)
	}

	tmp := file + ".new"
	if err := os.WriteFile(tmp, []byte(opsConfig("40")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the new configuration to be in force", func() bool {
		got, err := lease(t, s.addr, "--tls-ca", certs.CA.File)
		return err == nil && got == 40
	})
	if !strings.Contains(s.stderr.String(), "doorman server: configuration from "+file+" applied: 1 templates") {
		t.Errorf("stderr:\n%s", s.stderr.String())
	}
	if err := os.WriteFile(tmp, []byte(opsConfig("-1")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the bad configuration to be refused", func() bool {
		return strings.Contains(s.stderr.String(), "refused, the one in force stays: server: template 0 (\"db\"): capacity is -1")
	})
	if got, err := lease(t, s.addr, "--tls-ca", certs.CA.File); err != nil || got != 40 {
		t.Errorf("after a refused configuration: %v, %v; want 40", got, err)
	}

	testwait.Until(t, "/metrics to show the RPCs and the reloads", func() bool {
		m := testhttp.OK(t, "http://"+s.debugAddr+"/metrics")
		return regexp.MustCompile(`(?m)^lease_server_requests\{outcome="ok",rpc="GetCapacity"\} [1-9]`).MatchString(m) &&
			regexp.MustCompile(`(?m)^lease_server_latency_bucket\{rpc="GetCapacity",le="\+Inf"\} [1-9]`).MatchString(m) &&
			strings.Contains(m, `lease_config_reloads{outcome="applied"} 1`) &&
			strings.Contains(m, `lease_config_reloads{outcome="refused"} 1`)
	})
	if page := testhttp.OK(t, "http://"+s.debugAddr+"/status?format=json"); !strings.Contains(page, `"id": "db"`) || !strings.Contains(page, `"capacity": 40`) {
		t.Errorf("/status:\n%s", page)
	}
}

// A TLS file replaced by one that does not load is told on stderr, by
// doorman serve and by a Doorman client, and the last good one stays in
// use: the server and the client still agree.
func TestDoormanOpsTLSReloadErrors(t *testing.T) {
	t.Parallel() // waits on real time (a second between looks at the files)
	certs := testcerts.New(t)
	dir := t.TempDir()
	cert, key, ca := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"), filepath.Join(dir, "ca.pem")
	for dst, src := range map[string]string{cert: certs.Server.Cert, key: certs.Server.Key, ca: certs.CA.File} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := startOpsServer(t, []string{"--tls-cert", cert, "--tls-key", key}, writeConfig(t, testDoormanConfig), "")
	var clientErr syncBuffer
	opts := testDialOptions(t, &clientErr, "--tls-ca", ca)
	if got, err := leaseWith(t, s.addr, opts); err != nil || got != 100 {
		t.Fatalf("before the files changed: %v, %v; want 100", got, err)
	}
	for _, f := range []string{cert, ca} {
		if err := os.WriteFile(f, []byte("not PEM\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	serverWant := "sluice-lab doorman serve: a changed TLS file did not load: tlsfiles: still presenting the certificate loaded before"
	clientWant := "sluice-lab doorman get: a changed TLS file did not load: tlsfiles: still trusting the CA loaded before"
	testwait.Until(t, "both sides to report the files that do not load", func() bool {
		if got, err := leaseWith(t, s.addr, opts); err != nil || got != 100 {
			t.Fatalf("with the last good files: %v, %v; want 100", got, err)
		}
		return strings.Contains(s.stderr.String(), serverWant) && strings.Contains(clientErr.String(), clientWant)
	})
}

// With --tls-ca the server requires a client certificate its CA signed.
func TestDoormanOpsMutualTLS(t *testing.T) {
	certs := testcerts.New(t)
	s := startOpsServer(t, []string{"--tls-cert", certs.Server.Cert, "--tls-key", certs.Server.Key, "--tls-ca", certs.CA.File},
		writeConfig(t, testDoormanConfig), "")
	if _, err := lease(t, s.addr, "--tls-ca", certs.CA.File); err == nil {
		t.Error("a client without a certificate got a lease")
	}
	if got, err := lease(t, s.addr, "--tls-ca", certs.CA.File, "--tls-cert", certs.Client.Cert, "--tls-key", certs.Client.Key); err != nil || got != 100 {
		t.Errorf("a client with a certificate: %v, %v", got, err)
	}
}

// --config etcd:KEY loads the key at start and follows its changes.
func TestDoormanOpsEtcdConfig(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	et := startEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{et.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/doorman/config", testDoormanConfig); err != nil {
		t.Fatal(err)
	}
	s := startOpsServer(t, nil, "etcd:/doorman/config", et.Endpoint)
	if got, err := lease(t, s.addr); err != nil || got != 100 {
		t.Fatalf("%v, %v; want 100", got, err)
	}
	if _, err := cli.Put(ctx, "/doorman/config", opsConfig("25")); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the etcd configuration to be in force", func() bool {
		got, err := lease(t, s.addr)
		return err == nil && got == 25
	})
}

// Bad flags and files are refused with an error naming them.
func TestDoormanOpsErrors(t *testing.T) {
	certs := testcerts.New(t)
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", certs.Server.Cert}, "--tls-cert needs --tls-key"},
		{[]string{"--tls-key", certs.Server.Key}, "--tls-key needs --tls-cert"},
		{[]string{"--tls-ca", certs.CA.File}, "--tls-ca (client certificates) needs --tls-cert and --tls-key"},
		{[]string{"--config-poll", "-1s"}, "--config-poll is -1s, must be >= 0"},
	} {
		fs := cli.NewFlagSet("sluice-lab doorman serve", doormanServeHelp, io.Discard, io.Discard)
		ops := addServeFlags(fs)
		if _, ok := fs.ParseArgs(tc.args); !ok {
			t.Fatalf("parse %q failed", tc.args)
		}
		if err := ops.validate("127.0.0.1:0", nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}

	ops := &serveFlags{}
	for _, tc := range []struct{ config, endpoints, want string }{
		{missing, "", "server: reading configuration: open " + missing},
		{writeConfig(t, opsConfig("-3")), "", `template 0 ("db"): capacity is -3`},
		{"etcd:", "127.0.0.1:2379", `--config "etcd:" names no etcd key`},
		{"etcd:/k", " , ", "--config etcd:/k needs the etcd cluster's endpoints (--etcd HOST:PORT,...)"},
	} {
		if _, err := ops.loadConfig(context.Background(), tc.config, tc.endpoints); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("loadConfig(%q, %q): %v, want %q", tc.config, tc.endpoints, err, tc.want)
		}
	}

	// The files are read by validate, before the configuration is loaded
	// or anything listens: a bad one is a usage error.
	parsed := func(args ...string) *serveFlags {
		fs := cli.NewFlagSet("sluice-lab doorman serve", doormanServeHelp, io.Discard, io.Discard)
		ops := addServeFlags(fs)
		if _, ok := fs.ParseArgs(args); !ok {
			t.Fatalf("parse %q failed", args)
		}
		return ops
	}
	bad := parsed("--tls-cert", certs.Server.Cert, "--tls-key", certs.Client.Key)
	if err := bad.validate("127.0.0.1:0", nil); err == nil || !strings.Contains(err.Error(), "private key does not match public key") {
		t.Errorf("a mismatched key: %v", err)
	}
	bad = parsed("--tls-cert", "/nonexistent/s.pem", "--tls-key", certs.Client.Key)
	if err := bad.validate("127.0.0.1:0", nil); err == nil || !strings.Contains(err.Error(), "--tls-cert/--tls-key: tlsfiles: reading certificate: open /nonexistent/s.pem") {
		t.Errorf("a missing certificate: %v", err)
	}
	var out, errOut bytes.Buffer
	code := doormanRun(context.Background(), []string{"serve", "--config", missing, "--listen", "127.0.0.1:0",
		"--tls-cert", certs.Server.Cert, "--tls-key", "/nonexistent/s-key.pem"}, &out, &errOut)
	if want := "sluice-lab doorman serve: --tls-cert/--tls-key: tlsfiles: reading key: open /nonexistent/s-key.pem"; code != cli.ExitUsage || !strings.Contains(errOut.String(), want) {
		t.Errorf("doorman serve with a missing key and a missing --config: exit %d, stderr %q; want %d and %q", code, errOut.String(), cli.ExitUsage, want)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", certs.Client.Cert}, "--tls-cert needs --tls-key"},
		{[]string{"--tls-server-name", "doorman.test"}, "--tls-server-name is the name a TLS server's certificate must carry: give --tls or --tls-ca too"},
		{[]string{"--tls-ca", missing}, "--tls-ca: tlsfiles: reading CA: open " + missing},
	} {
		fs := cli.NewFlagSet("sluice-lab doorman get", doormanGetHelp, io.Discard, io.Discard)
		tf := addDoormanClientTLSFlags(fs)
		if _, ok := fs.ParseArgs(tc.args); !ok {
			t.Fatalf("parse %q failed", tc.args)
		}
		if _, err := dialOptions(tf, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("get %q: %v, want %q", tc.args, err, tc.want)
		}
	}
}
