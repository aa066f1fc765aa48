package etcdserver

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// putGet writes a key through endpoint and reads it back.
func putGet(t *testing.T, endpoint string) {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Get(ctx, "k"); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get(k) = %v, %v; want v", resp, err)
	}
}

func TestEmbedded(t *testing.T) {
	s, err := Start(Config{Dir: t.TempDir(), Embedded: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Kind, "embedded etcd ") {
		t.Errorf("Kind %q, want embedded etcd VERSION", s.Kind)
	}
	putGet(t, s.Endpoint)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestBinary(t *testing.T) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("no etcd binary on the PATH")
	}
	s, err := Start(Config{Dir: t.TempDir(), Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Kind, "etcd binary "+bin+" (etcd Version: ") {
		t.Errorf("Kind %q, want the binary and its version", s.Kind)
	}
	putGet(t, s.Endpoint)
}

func TestStartNeedsDir(t *testing.T) {
	if _, err := Start(Config{}); err == nil || !strings.Contains(err.Error(), "Config.Dir") {
		t.Fatalf("Start without Dir: %v, want an error naming Config.Dir", err)
	}
}
