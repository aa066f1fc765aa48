package main

import (
	"context"
	"github.com/sluice-rpc/sluice/discovery/etcd"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/tools/internal/etcdserver"
)

// sluice serve --register puts its address in etcd, sluice call -P
// etcd://... finds it there, and the server's shutdown (its context ends,
// as on SIGTERM) takes the key away before it exits.
func TestServeRegistersCallFinds(t *testing.T) {
	t.Parallel() // waits on real time
	et := startEtcd(t)
	u, err := url.Parse(et.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	target := "etcd://" + u.Host + "/services/echo"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- cli.ServeContext(ctx, []string{"--listen", "127.0.0.1:0", "--register", target, "--register-ttl", "2s", "--shutdown-quiet", "10ms"}, labTable(), &out, &errOut)
	}()
	testwait.Until(t, "sluice serve to listen", func() bool { return strings.Contains(out.String(), "serving echo on ") })
	addr := strings.TrimSpace(strings.TrimPrefix(out.String(), "serving echo on "))

	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{u.Host}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	keys := func() []string {
		gctx, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		res, err := ec.Get(gctx, "services/echo/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, kv := range res.Kvs {
			ks = append(ks, string(kv.Key))
		}
		return ks
	}
	// Registration is asynchronous: the server serves first.
	testwait.Until(t, "the registration", func() bool { return len(keys()) == 1 })
	var callOut, callErr syncBuffer
	if code := run([]string{"call", "-P", target, "-s", "echo", "-m", "echo", "-r", `{"a":1}`, "-v"}, &callOut, &callErr); code != 0 {
		t.Fatalf("sluice call -P %s: exit %d: %s", target, code, callErr.String())
	}
	if got := strings.TrimSpace(callOut.String()); got != `{"a":1}` {
		t.Fatalf("stdout %q, want the echoed body", got)
	}
	if !strings.Contains(callErr.String(), addr) {
		t.Fatalf("-v does not name the registered peer %s: %s", addr, callErr.String())
	}

	if ks := keys(); len(ks) != 1 || ks[0] != "services/echo/"+addr {
		t.Fatalf("keys under services/echo/: %v, want services/echo/%s", ks, addr)
	}
	cancel()
	if code := testwait.Recv(t, exit, "sluice serve to exit"); code != cli.ExitOK {
		t.Fatalf("sluice serve exited %d: %s", code, errOut.String())
	}
	if ks := keys(); len(ks) != 0 {
		t.Fatalf("keys left after the shutdown: %v", ks)
	}
	if !strings.Contains(errOut.String(), "shutting down") {
		t.Fatalf("stderr does not say it shuts down: %s", errOut.String())
	}
}

// startEtcd starts an etcd member embedded in the test process, its data
// in t.TempDir, and stops it when t ends.
func startEtcd(t *testing.T) *etcdserver.Server {
	t.Helper()
	s, err := etcdserver.StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The everyday sluice's --register-ttl default is the etcd registrar's.
func TestRegisterTTLDefault(t *testing.T) {
	if cli.DefaultRegisterTTL != etcd.DefaultTTL {
		t.Errorf("cli.DefaultRegisterTTL is %v, discovery/etcd.DefaultTTL %v", cli.DefaultRegisterTTL, etcd.DefaultTTL)
	}
}
