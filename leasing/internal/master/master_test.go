package master

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// node answers Discovery: the master when master is empty, otherwise a
// redirect to master ("-" for "not the master, none known").
type node struct {
	pb.UnimplementedCapacityServer
	self, master string
	// GetCapacity fails with code fail; discoveries and calls count the
	// RPCs.
	fail               codes.Code
	discoveries, calls atomic.Int32
}

func (n *node) GetCapacity(context.Context, *pb.GetCapacityRequest) (*pb.GetCapacityResponse, error) {
	n.calls.Add(1)
	return nil, status.Errorf(n.fail, "emulated %v", n.fail)
}

func (n *node) Discovery(context.Context, *pb.DiscoveryRequest) (*pb.DiscoveryResponse, error) {
	n.discoveries.Add(1)
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

// Call rediscovers the master and retries once after an error that may be
// the connection's or the server's passing state, but not after one that
// rejects the request itself: that is returned at once, the connection
// kept.
func TestFinderCallRetriesOnlyTransientErrors(t *testing.T) {
	for _, tt := range []struct {
		code                    codes.Code
		wantCalls, wantDiscover int32
		wantKnown               bool
	}{
		{codes.Unavailable, 2, 2, true},
		{codes.DeadlineExceeded, 2, 2, true},
		{codes.InvalidArgument, 1, 1, true},
		{codes.ResourceExhausted, 1, 1, true},
		{codes.PermissionDenied, 1, 1, true},
	} {
		t.Run(tt.code.String(), func(t *testing.T) {
			n := start(t, "")
			n.fail = tt.code
			f := finder(n.self, 3)
			defer f.Forget()
			err := f.Call(context.Background(), "GetCapacity", func(ctx context.Context, conn pb.Conn) (*pb.Mastership, error) {
				_, err := conn.GetCapacity(ctx, &pb.GetCapacityRequest{ClientId: proto.String("c")})
				return nil, err
			})
			if status.Code(errors.Unwrap(err)) != tt.code || !strings.Contains(err.Error(), "test: GetCapacity to "+n.self) {
				t.Fatalf("Call: %v, want the %v naming the RPC and its target", err, tt.code)
			}
			if c, d := n.calls.Load(), n.discoveries.Load(); c != tt.wantCalls || d != tt.wantDiscover {
				t.Fatalf("after %v: %d calls and %d Discovery RPCs, want %d and %d", tt.code, c, d, tt.wantCalls, tt.wantDiscover)
			}
			if tt.wantCalls == 1 && (!f.Known() || f.Target() != n.self) {
				t.Fatalf("after %v the Finder forgot the master (target %s, known %v)", tt.code, f.Target(), f.Known())
			}
		})
	}
}
