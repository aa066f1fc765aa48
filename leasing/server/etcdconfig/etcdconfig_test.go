package etcdconfig_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/slogtest"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/internal/serverhook"
	"github.com/sluice-rpc/sluice/internal/testkit/etcdtest"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/leasing/server"
	"github.com/sluice-rpc/sluice/leasing/server/etcdconfig"
)

const key = "/doorman/config"

func config(capacity string) string {
	return `
resources:
- identifier_glob: r
  capacity: ` + capacity + `
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15, learning_mode_duration: 0}
`
}

func newClient(t *testing.T, et *etcdtest.Etcd) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{et.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func put(t *testing.T, cli *clientv3.Client, value string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Put(ctx, key, value)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// granted asks s for 200 of r as client a and returns what it got.
func granted(t *testing.T, s *server.Server) float64 {
	t.Helper()
	c, err := serverhook.Capacity(s)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.GetCapacity(context.Background(), &pb.GetCapacityRequest{ClientId: proto.String("a"),
		Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(200)}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Response[0].GetGets().GetCapacity()
}

// watch runs Watch until the test ends.
func watch(t *testing.T, cli *clientv3.Client, rev int64, r *server.Reloader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- etcdconfig.Watch(ctx, cli, key, rev, r) }()
	t.Cleanup(func() {
		cancel()
		if err := testwait.Recv(t, done, "Watch to return"); err != nil {
			t.Errorf("Watch returned %v when its context ended", err)
		}
	})
}

// On a real (embedded) etcd: the server starts with the key's value and
// follows every change; a bad value and a deleted key are logged and the
// configuration in force stays.
func TestLoadAndWatch(t *testing.T) {
	et := etcdtest.Start(t)
	cli := newClient(t, et)
	put(t, cli, config("100"))
	repo, rev, err := etcdconfig.Load(context.Background(), cli, key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Config{Repository: repo})
	if err != nil {
		t.Fatal(err)
	}
	var log slogtest.Lines
	watch(t, cli, rev, server.NewReloader(s, server.ReloadConfig{Logger: log.Logger()}))
	if got := granted(t, s); got != 100 {
		t.Fatalf("a got %v, want 100", got)
	}

	put(t, cli, config("40"))
	testwait.Until(t, "capacity 40 from etcd", func() bool { return granted(t, s) == 40 })
	// The Reloader logs after it applies: the new capacity can be seen
	// before the line is written.
	testwait.Until(t, "the apply to be logged", func() bool {
		return log.Has(`configuration from etcd key "/doorman/config" applied: 1 templates`)
	})

	put(t, cli, config("-5"))
	testwait.Until(t, "the bad value to be refused", func() bool {
		return log.Has(`configuration from etcd key "/doorman/config" refused, the one in force stays: server: template 0 ("r"): capacity is -5`)
	})
	if got := granted(t, s); got != 40 {
		t.Errorf("after a bad value a got %v, want 40", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the deletion to be logged", func() bool {
		return log.Has(`etcdconfig: etcd key "/doorman/config" was deleted; the configuration in force stays`)
	})
	if got := granted(t, s); got != 40 {
		t.Errorf("after the key's deletion a got %v, want 40", got)
	}
	put(t, cli, config("70"))
	testwait.Until(t, "capacity 70 from etcd", func() bool { return granted(t, s) == 70 })
}

// Watching from revision 0 applies the key's value first; watching from a
// revision etcd has compacted reads the key afresh.
func TestWatchFromZeroAndAfterCompaction(t *testing.T) {
	et := etcdtest.Start(t)
	cli := newClient(t, et)
	first := put(t, cli, config("100"))
	s, err := server.New(server.Config{Repository: &server.Repository{}})
	if err != nil {
		t.Fatal(err)
	}
	watch(t, cli, 0, server.NewReloader(s, server.ReloadConfig{}))
	testwait.Until(t, "capacity 100 from etcd", func() bool { return granted(t, s) == 100 })

	put(t, cli, config("30"))
	last := put(t, cli, config("20"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	s2, err := server.New(server.Config{Repository: &server.Repository{}})
	if err != nil {
		t.Fatal(err)
	}
	var log slogtest.Lines
	watch(t, cli, first, server.NewReloader(s2, server.ReloadConfig{Logger: log.Logger()}))
	testwait.Until(t, "capacity 20 after the compaction", func() bool { return granted(t, s2) == 20 })
	if !log.Has("required revision has been compacted") {
		t.Errorf("the compaction is not logged: %s", log.String())
	}
}

func TestLoadErrors(t *testing.T) {
	et := etcdtest.Start(t)
	cli := newClient(t, et)
	ctx := context.Background()
	if _, _, err := etcdconfig.Load(ctx, cli, key); err == nil || !strings.Contains(err.Error(), `etcdconfig: etcd key "/doorman/config" holds no configuration`) {
		t.Errorf("a missing key: %v", err)
	}
	put(t, cli, "resources: [{identifier_glob: r, capacity: 1, algorithm: {kind: NOPE}}]")
	if _, _, err := etcdconfig.Load(ctx, cli, key); err == nil || !strings.Contains(err.Error(), `etcdconfig: etcd key "/doorman/config": server: template 0 ("r"): `) {
		t.Errorf("a bad value: %v", err)
	}
	if _, _, err := etcdconfig.Load(ctx, cli, ""); err == nil || !strings.Contains(err.Error(), "the etcd key is empty") {
		t.Errorf("an empty key: %v", err)
	}
	if err := etcdconfig.Watch(ctx, cli, key, 0, nil); err == nil || !strings.Contains(err.Error(), "the Reloader is nil") {
		t.Errorf("a nil Reloader: %v", err)
	}
}
