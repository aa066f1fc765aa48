package server

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// from returns a context whose request comes from ip, as gRPC's would.
func from(ip string) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}})
}

// askFrom sends one GetCapacity for resource "r" from client at ctx's
// source.
func askFrom(ctx context.Context, s *Server, client string, wants float64) (float64, error) {
	resp, err := s.getCapacity(ctx, &pb.GetCapacityRequest{ClientId: proto.String(client), Resource: []*pb.ResourceRequest{{
		ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(wants)}}})
	if err != nil {
		return 0, err
	}
	return resp.Response[0].GetGets().GetCapacity(), nil
}

func mustAskFrom(t *testing.T, ctx context.Context, s *Server, client string, wants float64) float64 {
	t.Helper()
	got, err := askFrom(ctx, s, client, wants)
	if err != nil {
		t.Fatalf("%s: %v", client, err)
	}
	return got
}

func wantRefusedAtShare(t *testing.T, err error, what string) {
	t.Helper()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "its share of the table") {
		t.Fatalf("%s: got %v, want ResourceExhausted saying the source holds its share", what, err)
	}
}

// sourceClients returns how many clients each source holds.
func sourceClients(s *Server) map[string]int {
	srcs, _ := s.topSources(math.MaxInt)
	m := make(map[string]int, len(srcs))
	for _, src := range srcs {
		m[src.Source] = src.Clients
	}
	return m
}

func sourcesAre(t *testing.T, s *Server, want map[string]int) {
	t.Helper()
	if got := sourceClients(s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("clients by source: %v, want %v", got, want)
	}
}

// A full client table makes room for a new client of a source holding
// less than its share (the table's size over the sources holding
// clients), by evicting the client of the source holding the most that
// has gone longest without a request; a source at its share is refused;
// renewals go on; nothing changes while the table has room.
func TestFullTableIsSharedBetweenSources(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s, err := New(Config{Repository: testConfig(FairShare, 100), Clock: clk, MaxClients: 6})
	if err != nil {
		t.Fatal(err)
	}
	a, b := from("10.0.0.1"), from("10.0.0.2")
	for i := range 6 {
		mustAskFrom(t, a, s, fmt.Sprintf("a%d", i), 10)
		clk.Add(time.Second)
	}
	sourcesAre(t, s, map[string]int{"10.0.0.1": 6})
	// a0 renews: a1 is now the one that has gone longest without asking.
	mustAskFrom(t, a, s, "a0", 10)
	clk.Add(time.Second)
	if _, err := askFrom(a, s, "a6", 10); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a seventh client of the only source: %v, want ResourceExhausted", err)
	}

	// b holds nothing, less than its share (6 / 2 sources): b0 takes a1's
	// place, and a1's lease is released at once (a gets its 10 each and
	// b0 the rest: 100 - 5*10).
	if got := mustAskFrom(t, b, s, "b0", 100); got != 50 {
		t.Fatalf("b0 got %v, want 50 (a1's lease released, five of a's holding 10)", got)
	}
	counts(t, s, 1, 6, 6)
	if s.lookup("r").leases["a1"] != 0 {
		t.Fatal("a1 still holds a lease")
	}
	sourcesAre(t, s, map[string]int{"10.0.0.1": 5, "10.0.0.2": 1})
	mustAskFrom(t, b, s, "b1", 100)
	mustAskFrom(t, b, s, "b2", 100)
	sourcesAre(t, s, map[string]int{"10.0.0.1": 3, "10.0.0.2": 3})
	// Evicted in order of their last request: a1, a2, a3 (a0 renewed).
	for _, c := range []string{"a0", "a4", "a5"} {
		if s.lookup("r").leases[c] == 0 {
			t.Fatalf("%s was evicted; want a1, a2 and a3, which went longer without asking", c)
		}
	}

	// Both at their share: neither gets a new client in.
	_, err = askFrom(b, s, "b3", 1)
	wantRefusedAtShare(t, err, "b's fourth client")
	_, err = askFrom(a, s, "a1", 1)
	wantRefusedAtShare(t, err, "a's evicted client, back")
	// Renewals are answered.
	for _, c := range []string{"a0", "a4", "a5"} {
		mustAskFrom(t, a, s, c, 10)
	}
	for _, c := range []string{"b0", "b1", "b2"} {
		mustAskFrom(t, b, s, c, 10)
	}

	// A third source's share is 6 / 3 = 2.
	c := from("10.0.0.3")
	mustAskFrom(t, c, s, "c0", 1)
	mustAskFrom(t, c, s, "c1", 1)
	_, err = askFrom(c, s, "c2", 1)
	wantRefusedAtShare(t, err, "c's third client")
	sourcesAre(t, s, map[string]int{"10.0.0.1": 2, "10.0.0.2": 2, "10.0.0.3": 2})
	counts(t, s, 1, 6, 6)

	// Releases make room, and anyone may take it.
	if _, err := s.releaseCapacity(a, &pb.ReleaseCapacityRequest{ClientId: proto.String("a0"), ResourceId: []string{"r"}}); err != nil {
		t.Fatal(err)
	}
	mustAskFrom(t, c, s, "c2", 1)
	sourcesAre(t, s, map[string]int{"10.0.0.1": 1, "10.0.0.2": 2, "10.0.0.3": 3})
	checkClientTable(t, s)
}

// While the table has room no client is evicted, whatever the sources.
func TestTableWithRoomEvictsNobody(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s, err := New(Config{Repository: testConfig(FairShare, 100), Clock: clk, MaxClients: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 9 {
		mustAskFrom(t, from("10.0.0.1"), s, fmt.Sprintf("a%d", i), 1)
	}
	mustAskFrom(t, from("10.0.0.2"), s, "b0", 1)
	sourcesAre(t, s, map[string]int{"10.0.0.1": 9, "10.0.0.2": 1})
	counts(t, s, 1, 10, 10)
}

// An evicted client's leases are released as expiry releases them: every
// resource it held forgets it, and the capacity is handed out again.
func TestEvictionReleasesEveryLease(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s, err := New(Config{Repository: starRepo(), Clock: clk, MaxClients: 2})
	if err != nil {
		t.Fatal(err)
	}
	a := from("10.0.0.1")
	if _, err := s.getCapacity(a, &pb.GetCapacityRequest{ClientId: proto.String("a0"), Resource: []*pb.ResourceRequest{
		{ResourceId: proto.String("x"), Wants: proto.Float64(100)}, {ResourceId: proto.String("y"), Wants: proto.Float64(100)},
		{ResourceId: proto.String("z"), Wants: proto.Float64(100)}}}); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	if _, err := s.getCapacity(a, &pb.GetCapacityRequest{ClientId: proto.String("a1"), Resource: []*pb.ResourceRequest{
		{ResourceId: proto.String("x"), Wants: proto.Float64(100)}}}); err != nil {
		t.Fatal(err)
	}
	counts(t, s, 3, 2, 4)
	// b0 takes a0's place: x, y and z forget a0.
	resp, err := s.getCapacity(from("10.0.0.2"), &pb.GetCapacityRequest{ClientId: proto.String("b0"), Resource: []*pb.ResourceRequest{
		{ResourceId: proto.String("y"), Wants: proto.Float64(100)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Response[0].GetGets().GetCapacity(); got != 100 {
		t.Fatalf("b0 got %v of y, want 100 (a0's lease of y released)", got)
	}
	counts(t, s, 3, 2, 2) // a1's lease of x and b0's of y; z is forgotten once due
	for _, id := range []string{"x", "y", "z"} {
		r := s.lookup(id)
		if _, ok := r.leases["a0"]; ok {
			t.Fatalf("%s still has a0's lease", id)
		}
		if _, _, has := r.tab.totals(); id == "z" && has != 0 {
			t.Fatalf("z still counts %v handed out", has)
		}
	}
}

// Within the source chosen, plain clients are evicted before servers
// lower in the tree, which stand for many clients each; servers go when
// their source has nothing else to give up.
func TestServersAreEvictedAfterClients(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s, err := New(Config{Repository: testConfig(FairShare, 100), Clock: clk, MaxClients: 5})
	if err != nil {
		t.Fatal(err)
	}
	a, b := from("10.0.0.1"), from("10.0.0.2")
	asServer := func(id string) {
		t.Helper()
		if _, err := s.getServerCapacity(a, &pb.GetServerCapacityRequest{ServerId: proto.String(id), Resource: []*pb.ServerCapacityResourceRequest{{
			ResourceId: proto.String("r"), Wants: []*pb.PriorityBandAggregate{{Priority: proto.Int64(1), NumClients: proto.Int64(50), Wants: proto.Float64(10)}}}}}); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Second)
	}
	asServer("mid1") // the oldest of a's
	asServer("mid2")
	for i := range 3 {
		mustAskFrom(t, a, s, fmt.Sprintf("a%d", i), 1)
		clk.Add(time.Second)
	}
	held := func(c string) bool { _, ok := s.lookup("r").leases[c]; return ok }
	// b's share is 5 / 2: its first two clients evict a's two oldest
	// plain clients, not the servers, older still.
	mustAskFrom(t, b, s, "b0", 1)
	mustAskFrom(t, b, s, "b1", 1)
	if !held("mid1") || !held("mid2") || held("a0") || held("a1") || !held("a2") {
		t.Fatal("want a0 and a1 evicted, a's servers and a2 kept")
	}
	// A third source (share 5 / 3): a holds the most, and gives up a2.
	c := from("10.0.0.3")
	mustAskFrom(t, c, s, "c0", 1)
	if held("a2") || !held("mid1") || !held("mid2") {
		t.Fatal("want a2 evicted, a's servers kept")
	}
	// Now a holds two servers and nothing else; b two, c one. A fourth
	// source: the top (a or b, 2 each) gives up its oldest, plain client
	// or server.
	mustAskFrom(t, from("10.0.0.4"), s, "d0", 1)
	if held("mid1") && held("b0") {
		t.Fatal("neither a's oldest server nor b's oldest client was evicted")
	}
	if !held("mid2") || !held("b1") {
		t.Fatal("a source's newer client was evicted before its oldest")
	}
}

// Requests without a peer address (in-process transports) count as one
// source, "local"; the addresses of one IPv6 /64 as one; an IPv4 address
// mapped into IPv6 as the IPv4 address.
func TestSourceOfARequest(t *testing.T) {
	for _, c := range []struct {
		ctx  context.Context
		want string
	}{
		{context.Background(), "local"},
		{peer.NewContext(context.Background(), &peer.Peer{}), "local"},
		{from("127.0.0.2"), "127.0.0.2"},
		{from("::ffff:10.1.2.3"), "10.1.2.3"},
		{from("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64"},
		{from("2001:db8:1:2:bbbb::7"), "2001:db8:1:2::/64"},
		{from("2001:db8:1:3::1"), "2001:db8:1:3::/64"},
		{peer.NewContext(context.Background(), &peer.Peer{Addr: &net.UDPAddr{IP: net.ParseIP("10.9.9.9"), Port: 1}}), "10.9.9.9"},
	} {
		if got := sourceName(sourceOf(c.ctx)); got != c.want {
			t.Errorf("source of %v: %q, want %q", c.ctx, got, c.want)
		}
	}
	if sourceOf(from("2001:db8:1:2:aaaa::1")) != netip.MustParseAddr("2001:db8:1:2::") {
		t.Error("an IPv6 source is not its /64 prefix")
	}
}

// The least recently renewed client is found in order of the clients'
// last requests, however they renewed since they joined.
func TestOldestClientOfASource(t *testing.T) {
	var l clientList
	es := make([]*clientEntry, 6)
	for i := range es {
		es[i] = &clientEntry{id: fmt.Sprint(i), lru: lruLinks[*clientEntry]{linked: int64(i)}}
		es[i].last.Store(int64(i))
		l.insert(es[i])
	}
	// Renewals at 10, 11, 12 by 0, 3 and 1: 2 is now the oldest, then 4,
	// 5, 0, 3, 1.
	es[0].last.Store(10)
	es[3].last.Store(11)
	es[1].last.Store(12)
	var order []string
	for l.n > 0 {
		e := l.oldest()
		order = append(order, e.id)
		l.remove(e)
	}
	if got := strings.Join(order, " "); got != "2 4 5 0 3 1" {
		t.Fatalf("evicted in order %s, want 2 4 5 0 3 1", got)
	}
}

// dialFrom returns a gRPC client of addr whose connections come from the
// local address ip (any of 127.0.0.0/8 on loopback).
func dialFrom(t *testing.T, addr, ip string) pb.CapacityClient {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewCapacityClient(cc)
}

// Over gRPC: a flood of client ids from one address fills the client
// table and keeps renewing; clients from another address still get in,
// each taking a flooding client's place, and the flood gets no more
// back: its new ids are refused, its remaining clients' renewals
// answered.
func TestFloodFromOneSourceLeavesRoomForAnother(t *testing.T) {
	const maxClients, floodIDs, newcomers = 1000, 3000, 50
	s := newServer(t, Config{Repository: testConfig(FairShare, 1000), Clock: clock.NewFake(testEpoch), MaxClients: maxClients})
	addr := startServer(t, s, "")
	ask := func(c pb.CapacityClient, id string) error {
		_, err := c.GetCapacity(context.Background(), &pb.GetCapacityRequest{ClientId: proto.String(id),
			Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(1)}}})
		return err
	}

	// The flood: 8 workers ask for flood-0 ... flood-2999 in turn, again
	// and again, until stopped.
	flood := dialFrom(t, addr, "127.0.0.2")
	var rounds, answered, refused atomic.Int64
	var floodErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const workers = 8
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				for i := w; i < floodIDs; i += workers {
					select {
					case <-stop:
						return
					default:
					}
					switch err := ask(flood, fmt.Sprintf("flood-%d", i)); status.Code(err) {
					case codes.OK:
						answered.Add(1)
					case codes.ResourceExhausted:
						refused.Add(1)
					default:
						floodErr.Store(err)
					}
				}
				rounds.Add(1)
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	testwait.Until(t, "the flood to fill the table and go round once", func() bool {
		_, clients, _ := s.Counts()
		return clients == maxClients && rounds.Load() >= workers
	})

	newcomer := dialFrom(t, addr, "127.0.0.3")
	for i := range newcomers {
		if err := ask(newcomer, fmt.Sprintf("new-%d", i)); err != nil {
			t.Fatalf("new client %d of another address, during the flood: %v", i, err)
		}
	}
	// The flood goes on, and keeps what it has, no more: another round,
	// and the newcomers renew.
	answeredBefore, refusedBefore, roundsBefore := answered.Load(), refused.Load(), rounds.Load()
	testwait.Until(t, "the flood to go round again", func() bool { return rounds.Load() >= roundsBefore+workers })
	for i := range newcomers {
		if err := ask(newcomer, fmt.Sprintf("new-%d", i)); err != nil {
			t.Fatalf("new client %d renewing: %v", i, err)
		}
	}
	if err := floodErr.Load(); err != nil {
		t.Fatalf("the flood got %v", err)
	}
	if answered.Load() == answeredBefore || refused.Load() == refusedBefore {
		t.Fatalf("in the flood's last round: %d renewals answered, %d new ids refused; want both", answered.Load()-answeredBefore, refused.Load()-refusedBefore)
	}
	got := sourceClients(s)
	if got["127.0.0.3"] != newcomers || got["127.0.0.2"] > maxClients-newcomers || len(got) != 2 {
		t.Fatalf("clients by source %v: want %d for 127.0.0.3 and the rest of %d, at most, for 127.0.0.2", got, newcomers, maxClients)
	}
	checkClientTable(t, s)
}
