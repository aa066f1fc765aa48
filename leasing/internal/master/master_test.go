package master

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// node answers Discovery: the master when master is empty, otherwise a
// redirect to master ("-" for "not the master, none known").
type node struct {
	pb.UnimplementedCapacityServer
	self, master string
}

func (n *node) Discovery(context.Context, *pb.DiscoveryRequest) (*pb.DiscoveryResponse, error) {
	switch n.master {
	case "":
		return &pb.DiscoveryResponse{Mastership: &pb.Mastership{MasterAddress: proto.String(n.self)}, IsMaster: proto.Bool(true)}, nil
	case "-":
		return &pb.DiscoveryResponse{Mastership: &pb.Mastership{}, IsMaster: proto.Bool(false)}, nil
	}
	return &pb.DiscoveryResponse{Mastership: &pb.Mastership{MasterAddress: proto.String(n.master)}, IsMaster: proto.Bool(false)}, nil
}

func start(t *testing.T, master string) *node {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{self: lis.Addr().String(), master: master}
	g := grpc.NewServer()
	pb.RegisterCapacityServer(g, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Serve(lis)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return n
}

func finder(addr string, maxRedirects int) *Finder {
	return &Finder{Addr: addr, DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		RPCTimeout: time.Second, MaxRedirects: maxRedirects, Prefix: "test"}
}

// A redirect names the master: the Finder takes it as known, without
// asking it again (its answers redirect again if it is not).
func TestFinderFollowsDiscoveryRedirects(t *testing.T) {
	m := start(t, "")
	f2 := start(t, m.self)
	f := finder(f2.self, 1)
	defer f.Forget()
	if _, err := f.Conn(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.Target() != m.self || !f.Known() {
		t.Fatalf("target %s (known %v), want the master %s", f.Target(), f.Known(), m.self)
	}
	// Forget goes back to the configured address.
	f.Forget()
	if f.Target() != f2.self || f.Known() {
		t.Fatalf("after Forget: target %s (known %v), want %s", f.Target(), f.Known(), f2.self)
	}

	// One redirect too many.
	g := finder(f2.self, 0)
	defer g.Forget()
	if _, err := g.Conn(context.Background()); err == nil || !strings.Contains(err.Error(), "test: gave up after 0 mastership redirects (last to "+m.self+")") {
		t.Fatalf("with MaxRedirects 0: %v", err)
	}
	if g.Target() != f2.self {
		t.Fatalf("after giving up the target is %s, want the configured %s", g.Target(), f2.self)
	}
}

func TestFinderNoMasterKnown(t *testing.T) {
	n := start(t, "-")
	f := finder(n.self, 3)
	defer f.Forget()
	_, err := f.Conn(context.Background())
	if !errors.Is(err, ErrNoMaster) || !strings.Contains(err.Error(), "test: server "+n.self+" is not the master and does not know who is") {
		t.Fatalf("Conn: %v, want ErrNoMaster naming the server", err)
	}
}

func TestFinderUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	f := finder(addr, 3)
	defer f.Forget()
	if _, err := f.Conn(context.Background()); err == nil || !strings.Contains(err.Error(), "test: Discovery at "+addr) {
		t.Fatalf("Conn to a closed port: %v", err)
	}
}
