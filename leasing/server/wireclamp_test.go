package server

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/leasing/internal/wirenum"
)

// A hostile parent's lease terms are clamped before they become state:
// a refresh interval of 9223372037 s (which times time.Second overflows
// into a negative Duration, and made the refresh loop ask again at once,
// thousands of times a second) sets the next round wirenum.MaxSeconds/2
// away; an expiry of math.MaxInt64 lasts no longer than any lease; a
// refresh interval of 0 or less is taken as 1 s.
func TestHostileParentTermsAreClamped(t *testing.T) {
	for _, c := range []struct {
		name            string
		expiry, refresh int64 // from now
		wantNext        time.Duration
		wantExpiry      int64 // from now
	}{
		{"huge refresh interval", 20, 9223372037, wirenum.MaxSeconds * time.Second / 2, 20},
		{"largest refresh interval", 20, 1<<63 - 1, wirenum.MaxSeconds * time.Second / 2, 20},
		{"negative refresh interval", 20, -5, 500 * time.Millisecond, 20},
		{"endless expiry", 1<<62 - 1, 10, 5 * time.Second, wirenum.MaxSeconds},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, s, d, clk := drivenIntermediateWithResource(t)
			now := clk.Now().Unix()
			done := make(chan time.Time)
			go func() { done <- d.Tick(context.Background()) }()
			testwait.Recv(t, root.reqs, "the round's request")
			ans := originalAnswer(100, now+c.expiry, 10, 5)
			ans.Response[0].Gets.RefreshInterval = proto.Int64(c.refresh)
			root.answer <- ans
			next := testwait.Recv(t, done, "the round to end")
			if got := next.Sub(clk.Now()); got != c.wantNext {
				t.Fatalf("the next round is %v away, want %v", got, c.wantNext)
			}
			if _, e, _ := s.parentLease("r"); e.Unix() != now+c.wantExpiry {
				t.Fatalf("the parent's lease ends %d s from now, want %d", e.Unix()-now, c.wantExpiry)
			}
			// What the intermediate says it has, in its next request,
			// carries the clamped terms too.
			go func() { done <- d.Tick(context.Background()) }()
			req := testwait.Recv(t, root.reqs, "the next round's request")
			has := req.Resource[0].GetHas()
			if has.GetRefreshInterval() < 1 || has.GetRefreshInterval() > wirenum.MaxSeconds || has.GetExpiryTime() > now+wirenum.MaxSeconds {
				t.Fatalf("the intermediate says it has %v", has)
			}
			root.answer <- originalAnswer(100, now+20, 10, 5)
			testwait.Recv(t, done, "the next round to end")
		})
	}
}

// hostileParent answers every GetServerCapacity at once with a lease of
// capacity 100 for each resource asked, its refresh interval refresh, and
// counts the requests.
type hostileParent struct {
	pb.UnimplementedCapacityServer
	self     string
	refresh  int64
	requests atomic.Int64
}

func (h *hostileParent) Discovery(context.Context, *pb.DiscoveryRequest) (*pb.DiscoveryResponse, error) {
	return &pb.DiscoveryResponse{Mastership: &pb.Mastership{MasterAddress: proto.String(h.self)}, IsMaster: proto.Bool(true)}, nil
}

func (h *hostileParent) GetServerCapacity(_ context.Context, req *pb.GetServerCapacityRequest) (*pb.GetServerCapacityResponse, error) {
	h.requests.Add(1)
	resp := &pb.GetServerCapacityResponse{}
	for _, r := range req.GetResource() {
		resp.Response = append(resp.Response, &pb.ServerCapacityResourceResponse{
			ResourceId: proto.String(r.GetResourceId()),
			Gets: &pb.Lease{ExpiryTime: proto.Int64(time.Now().Unix() + 60), RefreshInterval: proto.Int64(h.refresh),
				Capacity: proto.Float64(100)},
		})
	}
	return resp, nil
}

// Over gRPC, on the wall clock: an intermediate under a parent answering
// with a refresh interval of 9223372037 s asks it once, not in a loop
// (it asked about 12,000 times a second). Three seconds of real time,
// under the slow gate; TestHostileParentTermsAreClamped checks the same
// on a fake clock.
func TestHostileParentIsAskedOnce(t *testing.T) {
	slowtest.Skip(t, "3 s on the wall clock")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostileParent{self: lis.Addr().String(), refresh: 9223372037}
	g := grpc.NewServer()
	pb.RegisterCapacityServer(g, h)
	done := make(chan struct{})
	go func() { defer close(done); g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); testwait.Recv(t, done, "the hostile parent to stop") })

	s, err := New(Config{Parent: h.self, ID: "mid"})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, startServer(t, s, ""))
	leaseOf(t, c, "a", 30)
	testwait.Until(t, "the parent's first answer", func() bool { _, _, ok := s.parentLease("r"); return ok })
	const window = 3 * time.Second
	before := h.requests.Load()
	time.Sleep(window) // a measurement over wall time, not a synchronisation
	n := h.requests.Load() - before
	t.Logf("requests to the hostile parent in %v after its first answer: %d", window, n)
	if n > int64(window/time.Second) {
		t.Fatalf("the intermediate asked the hostile parent %d times in %v, want at most one a second", n, window)
	}
}
