package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/servetest"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

var testEpoch = time.Unix(1_700_000_000, 0)

func int64p(v int64) *int64 { return &v }

// testConfig returns a one-template repository for resource "r" with no
// learning mode.
func testConfig(kind Kind, capacity float64) *Repository {
	return &Repository{Resources: []Template{{
		IdentifierGlob: "r",
		Capacity:       capacity,
		Algorithm: Algorithm{
			Kind:                 kind,
			LeaseLength:          60,
			RefreshInterval:      15,
			LearningModeDuration: int64p(0),
		},
	}}}
}

func newTestServer(t testing.TB, repo *Repository, clk clock.Clock) *Server {
	t.Helper()
	s, err := New(Config{Repository: repo, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ask sends one GetCapacity for resource "r" and returns the granted
// capacity, failing the test when the response has no entry for it.
func ask(t testing.TB, s *Server, client string, wants float64) float64 {
	t.Helper()
	resp, err := s.getCapacity(context.Background(), &pb.GetCapacityRequest{
		ClientId: proto.String(client),
		Resource: []*pb.ResourceRequest{{
			ResourceId: proto.String("r"),
			Priority:   proto.Int64(0),
			Wants:      proto.Float64(wants),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Response) != 1 || resp.Response[0].GetResourceId() != "r" {
		t.Fatalf("GetCapacity for r answered %v", resp)
	}
	return resp.Response[0].GetGets().GetCapacity()
}

func clientName(i int) string { return fmt.Sprintf("c%d", i) }

// startServer serves s on addr ("" means 127.0.0.1:0) and returns the
// address it listens on; the server stops at the end of the test.
func startServer(t testing.TB, s *Server, addr string) string {
	t.Helper()
	return servetest.Start(t, s, addr)
}

// dial returns a gRPC client of addr, closed at the end of the test.
func dial(t testing.TB, addr string) pb.CapacityClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewCapacityClient(cc)
}

func releaseAll(t testing.TB, s *Server, client string) {
	t.Helper()
	if _, err := s.releaseCapacity(context.Background(), &pb.ReleaseCapacityRequest{ClientId: proto.String(client), ResourceId: []string{"r"}}); err != nil {
		t.Fatal(err)
	}
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
