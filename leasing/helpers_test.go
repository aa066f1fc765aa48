package leasing

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/serverhook"
	"github.com/sluice-rpc/sluice/internal/testkit/servetest"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/leasing/server"
)

var testEpoch = time.Unix(1_700_000_000, 0)

func int64p(v int64) *int64 { return &v }

// testConfig returns a one-template repository for resource "r" with no
// learning mode.
func testConfig(kind server.Kind, capacity float64) *server.Repository {
	return &server.Repository{Resources: []server.Template{{
		IdentifierGlob: "r",
		Capacity:       capacity,
		Algorithm: server.Algorithm{
			Kind:                 kind,
			LeaseLength:          60,
			RefreshInterval:      15,
			LearningModeDuration: int64p(0),
		},
	}}}
}

func newTestServer(t testing.TB, repo *server.Repository, clk clock.Clock) *server.Server {
	t.Helper()
	s, err := server.New(server.Config{Repository: repo, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rpcs returns the Doorman RPCs of s, to call in-process.
func rpcs(t testing.TB, s *server.Server) pb.CapacityServer {
	t.Helper()
	c, err := serverhook.Capacity(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ask sends one GetCapacity for resource "r" and returns the granted
// capacity, or -1 when the response has no entry.
func ask(t testing.TB, s *server.Server, client string, wants float64) float64 {
	t.Helper()
	resp, err := rpcs(t, s).GetCapacity(context.Background(), &pb.GetCapacityRequest{
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
	if len(resp.Response) == 0 {
		return -1
	}
	return resp.Response[0].GetGets().GetCapacity()
}

// startServer serves s on addr ("" means 127.0.0.1:0) and returns the
// address it listens on; the server stops at the end of the test.
func startServer(t testing.TB, s *server.Server, addr string) string {
	t.Helper()
	return servetest.Start(t, s, addr)
}

// waitFor polls cond until it holds (see testwait.Until).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, what, cond)
}

func newTestClient(t testing.TB, addr, id string, clk clock.Clock) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{Addr: addr, ID: id, Clock: clk, ManualRefresh: true, RPCTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func mustResource(t testing.TB, c *Client, id string, rc ResourceConfig) *Resource {
	t.Helper()
	r, err := c.Resource(id, rc)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func refresh(t testing.TB, cs ...*Client) {
	t.Helper()
	for _, c := range cs {
		if err := c.Refresh(context.Background()); err != nil {
			t.Fatalf("%s: Refresh: %v", c.ID(), err)
		}
	}
}
