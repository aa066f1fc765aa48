package server

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/slogtest"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/leasing"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// fakeElection is an Election the test drives: each Mastership sent on
// outcomes is reported; an error sent on fail ends Run with it.
type fakeElection struct {
	outcomes chan Mastership
	fail     chan error
	runs     chan string // the id of every Run
}

func newFakeElection() *fakeElection {
	return &fakeElection{outcomes: make(chan Mastership), fail: make(chan error), runs: make(chan string, 10)}
}

func (f *fakeElection) Run(ctx context.Context, id string, report func(Mastership)) error {
	f.runs <- id
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-f.fail:
			return err
		case m := <-f.outcomes:
			report(m)
		}
	}
}

// tell reports m and waits until the server has applied it.
func (f *fakeElection) tell(t *testing.T, s *Server, m Mastership) {
	t.Helper()
	select {
	case f.outcomes <- m:
	case <-time.After(testwait.Limit):
		t.Fatalf("the election's Run is not running to report %+v", m)
	}
	testwait.Until(t, "the server to apply the election's outcome", func() bool { return s.Mastership() == m })
}

func askCapacity(t *testing.T, c pb.CapacityClient, client string, wants float64, has *pb.Lease) *pb.GetCapacityResponse {
	t.Helper()
	resp, err := c.GetCapacity(context.Background(), &pb.GetCapacityRequest{
		ClientId: proto.String(client),
		Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(wants), Has: has}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// A server with an election serves only while it is the master: before
// the election says so and after it loses, every RPC is answered with
// the mastership field alone, and Discovery says who the master is. On
// winning it starts empty in learning mode; on losing it drops all state.
func TestElectionMastership(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	repo := testConfig(FairShare, 100)
	repo.Resources[0].Algorithm.LearningModeDuration = int64p(20)
	el := newFakeElection()
	var mu sync.Mutex
	var changes []Mastership
	var log slogtest.Lines
	s, err := New(Config{Repository: repo, Clock: clk, Election: el, OnMastership: func(m Mastership) {
		mu.Lock()
		changes = append(changes, m)
		mu.Unlock()
	}, Logger: log.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, s, "")
	if id := testwait.Recv(t, el.runs, "the election to run"); id != addr {
		t.Fatalf("the election runs with id %q, want the advertised address %q", id, addr)
	}
	c := dial(t, addr)

	// No master known yet: mastership with no address.
	resp := askCapacity(t, c, "a", 10, nil)
	if len(resp.Response) != 0 || resp.Mastership == nil || resp.Mastership.MasterAddress != nil {
		t.Fatalf("before the election, GetCapacity answered %v, want only an empty mastership", resp)
	}
	d, err := c.Discovery(context.Background(), &pb.DiscoveryRequest{})
	if err != nil || d.GetIsMaster() || d.GetMastership().MasterAddress != nil {
		t.Fatalf("before the election, Discovery answered %v, %v; want is_master false and no address", d, err)
	}

	// Another server is master: everything redirects to it.
	el.tell(t, s, Mastership{Master: "10.0.0.1:7000"})
	resp = askCapacity(t, c, "a", 10, nil)
	if len(resp.Response) != 0 || resp.GetMastership().GetMasterAddress() != "10.0.0.1:7000" {
		t.Fatalf("a non-master answered GetCapacity with %v, want a redirect to 10.0.0.1:7000", resp)
	}
	sresp, err := c.GetServerCapacity(context.Background(), &pb.GetServerCapacityRequest{ServerId: proto.String("s"),
		Resource: []*pb.ServerCapacityResourceRequest{{ResourceId: proto.String("r")}}})
	if err != nil || len(sresp.Response) != 0 || sresp.GetMastership().GetMasterAddress() != "10.0.0.1:7000" {
		t.Fatalf("a non-master answered GetServerCapacity with %v, %v; want a redirect", sresp, err)
	}
	rresp, err := c.ReleaseCapacity(context.Background(), &pb.ReleaseCapacityRequest{ClientId: proto.String("a"), ResourceId: []string{"r"}})
	if err != nil || rresp.GetMastership().GetMasterAddress() != "10.0.0.1:7000" {
		t.Fatalf("a non-master answered ReleaseCapacity with %v, %v; want a redirect", rresp, err)
	}
	d, _ = c.Discovery(context.Background(), &pb.DiscoveryRequest{})
	if d.GetIsMaster() || d.GetMastership().GetMasterAddress() != "10.0.0.1:7000" {
		t.Fatalf("a non-master's Discovery answered %v", d)
	}
	if r, cl, l := s.Counts(); r+cl+l != 0 {
		t.Fatalf("a non-master holds %d resources, %d clients, %d leases", r, cl, l)
	}

	// Winning: learning mode for the template's 20 s from now, then the
	// algorithm.
	clk.Add(time.Hour)
	el.tell(t, s, Mastership{IsMaster: true, Master: addr})
	d, _ = c.Discovery(context.Background(), &pb.DiscoveryRequest{})
	if !d.GetIsMaster() || d.GetMastership().GetMasterAddress() != addr {
		t.Fatalf("the master's Discovery answered %v", d)
	}
	has := &pb.Lease{ExpiryTime: proto.Int64(clk.Now().Unix() + 30), RefreshInterval: proto.Int64(15), Capacity: proto.Float64(70)}
	if got := askCapacity(t, c, "a", 10, has).Response[0].GetGets().GetCapacity(); got != 70 {
		t.Fatalf("in learning mode a client claiming 70 got %v, want 70 back", got)
	}
	if got := askCapacity(t, c, "b", 100, nil).Response[0].GetGets().GetCapacity(); got != 0 {
		t.Fatalf("in learning mode a new client got %v, want 0", got)
	}
	clk.Add(20 * time.Second)
	if got := askCapacity(t, c, "b", 100, nil).Response[0].GetGets().GetCapacity(); got != 30 {
		t.Fatalf("after learning mode b got %v, want the 30 a leaves", got)
	}
	if got := askCapacity(t, c, "a", 10, nil).Response[0].GetGets().GetCapacity(); got != 10 {
		t.Fatalf("after learning mode a got %v, want what it wants, 10", got)
	}

	// Losing: state dropped, redirects again.
	el.tell(t, s, Mastership{Master: "10.0.0.2:7000"})
	if r, cl, l := s.Counts(); r+cl+l != 0 {
		t.Fatalf("after losing mastership the server holds %d resources, %d clients, %d leases", r, cl, l)
	}
	if resp := askCapacity(t, c, "a", 10, nil); resp.GetMastership().GetMasterAddress() != "10.0.0.2:7000" {
		t.Fatalf("after losing mastership GetCapacity answered %v", resp)
	}

	// Winning again starts over: empty, learning.
	el.tell(t, s, Mastership{IsMaster: true, Master: addr})
	if got := askCapacity(t, c, "b", 100, nil).Response[0].GetGets().GetCapacity(); got != 0 {
		t.Fatalf("a new master's new client got %v, want 0 in learning mode", got)
	}

	// An election that fails: not the master, and run again after a
	// backoff on the server's clock.
	select {
	case el.fail <- errors.New("lost the lock service"):
	case <-time.After(testwait.Limit):
		t.Fatal("the election's Run is not running")
	}
	testwait.Until(t, "the server to step down", func() bool { return !s.Mastership().IsMaster })
	testwait.Until(t, "the failed election to be logged at Warn", func() bool {
		return log.Count("WARN doorman server: the election failed") == 1 && log.Count("error=lost the lock service") == 1
	})
	testwait.Timers(t, clk, 1)
	clk.Add(electionMaxBackoff)
	testwait.Recv(t, el.runs, "the election to run again")

	want := []Mastership{{Master: "10.0.0.1:7000"}, {IsMaster: true, Master: addr}, {Master: "10.0.0.2:7000"}, {IsMaster: true, Master: addr}, {}}
	testwait.Until(t, "OnMastership to see every change", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(changes) >= len(want)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != len(want) {
		t.Fatalf("OnMastership saw %+v, want %+v", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Fatalf("OnMastership saw %+v, want %+v", changes, want)
		}
	}
}

// Sluice's leasing client, given a server that is not the master, follows
// its redirect to the master and gets its lease there.
func TestElectionClientFollowsRedirect(t *testing.T) {
	master := newTestServer(t, testConfig(FairShare, 100), nil)
	masterAddr := startServer(t, master, "")
	el := newFakeElection()
	follower, err := New(Config{Repository: testConfig(FairShare, 100), Election: el})
	if err != nil {
		t.Fatal(err)
	}
	followerAddr := startServer(t, follower, "")
	testwait.Recv(t, el.runs, "the election to run")
	el.tell(t, follower, Mastership{Master: masterAddr})

	c, err := leasing.NewClient(leasing.ClientConfig{Addr: followerAddr, ID: "a", ManualRefresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Resource("r", leasing.ResourceConfig{Wants: 40, Mode: leasing.Pessimistic})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _, ok := r.Lease(); !ok || got != 40 {
		t.Fatalf("the client's lease is %v (ok %v), want 40 from the master", got, ok)
	}
	if _, cl, _ := master.Counts(); cl != 1 {
		t.Fatalf("the master has %d clients, want the redirected one", cl)
	}
}

// An elected intermediate must be given the server_id its node's servers
// share: each server's own address would make the parent see a new
// child at every change of mastership.
func TestConfigElectedIntermediateNeedsID(t *testing.T) {
	cfg := Config{Parent: "127.0.0.1:1", Election: newFakeElection()}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), `server: Config.ID is "", must be set with both Parent and Election: the servers of an elected intermediate node must present the parent one server_id`) {
		t.Fatalf("Validate() = %v, want an error saying the node's servers must present one server_id", err)
	}
	if _, err := New(cfg); err == nil {
		t.Fatal("New accepted an elected intermediate without an ID")
	}
	cfg.ID = "/doorman/mid"
	if err := cfg.Validate(); err != nil {
		t.Fatalf("with an ID: Validate() = %v", err)
	}
	// Either alone needs none.
	for _, c := range []Config{{Parent: "127.0.0.1:1"}, {Repository: testConfig(FairShare, 1), Election: newFakeElection()}} {
		if err := c.Validate(); err != nil {
			t.Fatalf("Validate(%+v) = %v, want nil", c, err)
		}
	}
}
