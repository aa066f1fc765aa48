package leasing

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/internal/clock"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// A configuration pushed after learning mode ended must not put resources
// back into it.
func TestSetConfigDoesNotRestartLearningMode(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	cfg := testConfig(FairShare, 100)
	cfg.Resources[0].Algorithm.LearningModeDuration = nil // learning for lease_length (60 s)
	s := newTestServer(t, cfg, clk)
	ask(t, s, "a", 10) // the resource exists, in learning mode
	clk.Add(100 * time.Second)
	longer := testConfig(FairShare, 100)
	longer.Resources[0].Algorithm.LearningModeDuration = nil
	longer.Resources[0].Algorithm.LeaseLength = 300
	if err := s.SetConfig(longer); err != nil {
		t.Fatal(err)
	}
	if got := ask(t, s, "b", 10); got != 10 {
		t.Fatalf("a new client after the config push got %v, want 10 (learning mode had ended)", got)
	}
}

// With wants estimated from demand, an idle resource wants nothing.
func TestEstimatedWantsFallToZeroWhenIdle(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	addr := startServer(t, newTestServer(t, liveConfig(100, int64p(0), nil), clk), "")
	c, err := NewClient(ClientConfig{Addr: addr, ID: "idle", Clock: clk, ManualRefresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := mustResource(t, c, "r", ResourceConfig{Wants: 10, Mode: Pessimistic, EstimateWants: true})
	refresh(t, c)
	clk.Add(time.Minute) // no calls at all
	refresh(t, c)
	if got := r.Wants(); got != 0 {
		t.Fatalf("wants after an idle minute: %v, want 0", got)
	}
}

// After Close, Refresh and Release say so instead of dialling again.
func TestClientAfterClose(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	addr := startServer(t, newTestServer(t, liveConfig(100, int64p(0), nil), clk), "")
	c, err := NewClient(ClientConfig{Addr: addr, ID: "closing", Clock: clk, ManualRefresh: true})
	if err != nil {
		t.Fatal(err)
	}
	r := mustResource(t, c, "r", ResourceConfig{Wants: 10, Mode: Pessimistic})
	refresh(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Refresh after Close: %v, want ErrClosed", err)
	}
	if err := r.Release(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Release after Close: %v, want ErrClosed", err)
	}
}

// A lease that cannot outlive the minimum refresh interval would lapse
// between renewals: such a template is rejected.
func TestLeaseLengthMustOutliveMinRefresh(t *testing.T) {
	cfg := testConfig(FairShare, 100)
	cfg.Resources[0].Algorithm.LeaseLength = 3
	cfg.Resources[0].Algorithm.RefreshInterval = 1
	_, err := NewServer(ServerConfig{Config: cfg})
	if err == nil || !strings.Contains(err.Error(), `template 0 ("r"): lease_length is 3`) {
		t.Fatalf("NewServer: %v", err)
	}
	s := newTestServer(t, testConfig(FairShare, 100), nil)
	if err := s.SetConfig(cfg); err == nil {
		t.Fatal("SetConfig accepted a 3 s lease with a 5 s minimum refresh interval")
	}
}

// In learning mode a client gets back what it says it has, but never more
// than the capacity left.
func TestLearningModeEchoIsCapped(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	cfg := testConfig(FairShare, 100)
	cfg.Resources[0].Algorithm.LearningModeDuration = nil // learning for 60 s
	s := newTestServer(t, cfg, clk)
	has := func(client string, capacity float64) float64 {
		t.Helper()
		resp, err := s.GetCapacity(context.Background(), &pb.GetCapacityRequest{
			ClientId: proto.String(client),
			Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(10),
				Has: &pb.Lease{ExpiryTime: proto.Int64(clk.Now().Unix() + 60), RefreshInterval: proto.Int64(15), Capacity: proto.Float64(capacity)}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Response[0].GetGets().GetCapacity()
	}
	if got := has("greedy", 1e308); got != 100 {
		t.Fatalf("a claim of 1e308 got %v, want the capacity 100", got)
	}
	if got := has("honest", 30); got != 0 {
		t.Fatalf("with the capacity taken, a claim of 30 got %v, want 0", got)
	}
}
