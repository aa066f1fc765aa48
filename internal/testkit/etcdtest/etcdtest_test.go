package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
)

// newClient returns a client of et, closed when t ends. Its gRPC
// connection retries within 300 ms (gRPC's default waits 1 s, then
// longer), so that a restarted etcd is reached again at once.
func newClient(t *testing.T, et *Etcd) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{et.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: 300 * time.Millisecond},
			MinConnectTimeout: time.Second,
		})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestStartServesPutAndGet(t *testing.T) {
	et := Start(t)
	t.Log(et.Version)
	c := newClient(t, et)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Get(ctx, "k"); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get(k) = %v, %v; want v", resp, err)
	}
}

// Kill takes etcd down; Restart brings back the same store on the same
// endpoint; RestartEmpty brings back an empty one, its revisions counted
// from 1 again.
func TestKillRestartRestartEmpty(t *testing.T) {
	et := Start(t)
	c := newClient(t, et)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var rev int64
	for range 5 {
		resp, err := c.Put(ctx, "k", "v")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}

	et.Kill()
	et.Kill() // a second Kill does nothing
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := c.Get(short, "k")
	cancelShort()
	if err == nil {
		t.Fatal("Get succeeded with etcd killed")
	}

	et.Restart()
	resp, err := c.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || resp.Header.Revision != rev {
		t.Fatalf("after Restart: Get(k) = %v, %v; want v at revision %d", resp, err, rev)
	}

	et.RestartEmpty()
	resp, err = c.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 0 || resp.Header.Revision >= rev {
		t.Fatalf("after RestartEmpty: Get(k) = %v, %v; want no key, a revision below %d", resp, err, rev)
	}
}
