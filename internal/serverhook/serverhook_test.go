package serverhook_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/serverhook"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/leasing/server"
)

// direct is an in-memory connection to a server: it calls its RPC
// methods and counts the GetServerCapacity requests.
type direct struct {
	s    pb.CapacityServer
	asks int
}

func (d *direct) Close() error { return nil }

func (d *direct) Discovery(ctx context.Context, in *pb.DiscoveryRequest, _ ...grpc.CallOption) (*pb.DiscoveryResponse, error) {
	return d.s.Discovery(ctx, in)
}

func (d *direct) GetCapacity(ctx context.Context, in *pb.GetCapacityRequest, _ ...grpc.CallOption) (*pb.GetCapacityResponse, error) {
	return d.s.GetCapacity(ctx, in)
}

func (d *direct) GetServerCapacity(ctx context.Context, in *pb.GetServerCapacityRequest, _ ...grpc.CallOption) (*pb.GetServerCapacityResponse, error) {
	d.asks++
	return d.s.GetServerCapacity(ctx, in)
}

func (d *direct) ReleaseCapacity(ctx context.Context, in *pb.ReleaseCapacityRequest, _ ...grpc.CallOption) (*pb.ReleaseCapacityResponse, error) {
	return d.s.ReleaseCapacity(ctx, in)
}

func newServer(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// An intermediate whose parent link is driven asks its parent only when
// ticked, over the transport it was given, says when a new resource
// wants a tick, and sends nothing once stopped.
func TestDriveParent(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	noLearning := int64(0) // the root grants at once
	repo := &server.Repository{Resources: []server.Template{{IdentifierGlob: "*", Capacity: 100,
		Algorithm: server.Algorithm{Kind: server.FairShare, LeaseLength: 20, RefreshInterval: 10, LearningModeDuration: &noLearning}}}}
	root := newServer(t, server.Config{Repository: repo, Clock: clk, Address: "root"})
	parent := &direct{s: rpcs(t, root)}
	mid := newServer(t, server.Config{Clock: clk, Parent: "root", ID: "mid", Address: "mid"})

	p, err := serverhook.DriveParent(mid, func(addr string) (pb.Conn, error) {
		if addr != "root" {
			t.Errorf("dialled %q, want the parent, root", addr)
		}
		return parent, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mid.Start(); err != nil {
		t.Fatal(err)
	}
	if p.Woken() {
		t.Fatal("Woken before anything happened")
	}
	ctx := context.Background()
	if _, err := rpcs(t, mid).GetCapacity(ctx, &pb.GetCapacityRequest{ClientId: proto.String("c"),
		Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Wants: proto.Float64(10)}}}); err != nil {
		t.Fatal(err)
	}
	if !p.Woken() {
		t.Fatal("a new resource did not wake the parent link")
	}
	if p.Woken() {
		t.Fatal("Woken did not forget the wake-up it reported")
	}
	if parent.asks != 0 {
		t.Fatalf("the intermediate asked its parent %d times before its first tick", parent.asks)
	}

	now := clk.Now()
	next := p.Tick(ctx)
	if parent.asks != 1 {
		t.Fatalf("one tick asked the parent %d times, want once", parent.asks)
	}
	if capacity, ok := parentLease(mid, "r"); !ok || capacity != 10 {
		t.Fatalf("after the tick the intermediate holds %v (%v) of r from its parent, want its client's wants, 10", capacity, ok)
	}
	if want := now.Add(5 * time.Second); !next.Equal(want) {
		t.Fatalf("Tick returned %v, want half the parent's 10 s refresh interval later, %v", next, want)
	}

	mid.Stop()
	clk.Add(5 * time.Second)
	p.Tick(ctx)
	if parent.asks != 1 {
		t.Fatalf("a tick after Stop asked the parent (%d asks in all)", parent.asks)
	}
}

// DriveParent takes only an intermediate's link, and only before Start.
func TestDriveParentRefuses(t *testing.T) {
	repo := &server.Repository{Resources: []server.Template{{IdentifierGlob: "*", Capacity: 1,
		Algorithm: server.Algorithm{Kind: server.FairShare, LeaseLength: 20, RefreshInterval: 10}}}}
	root := newServer(t, server.Config{Repository: repo, Address: "root"})
	if _, err := serverhook.DriveParent(root, nil); err == nil {
		t.Error("DriveParent took a root server's (absent) parent link")
	}
	started := newServer(t, server.Config{Parent: "root", ID: "mid", Address: "mid"})
	if err := started.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := serverhook.DriveParent(started, nil); err == nil {
		t.Error("DriveParent took the link of a server already started, whose loop runs it")
	}
	if _, err := serverhook.DriveParent("mid", nil); err == nil {
		t.Error("DriveParent took a string for a server")
	}
}

// parentLease returns the capacity s holds of resource id from its
// parent, as its status shows it; false before the parent's first answer.
func parentLease(s *server.Server, id string) (float64, bool) {
	st := s.Status(server.StatusQuery{Resource: id})
	if len(st.ResourceList) != 1 || st.ResourceList[0].ParentLease == nil {
		return 0, false
	}
	return st.ResourceList[0].ParentLease.Capacity, true
}

// rpcs returns the Doorman RPCs of s, to call in-process.
func rpcs(t *testing.T, s *server.Server) pb.CapacityServer {
	t.Helper()
	c, err := serverhook.Capacity(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
