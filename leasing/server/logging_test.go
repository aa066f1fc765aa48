package server

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/ratelog"
	"github.com/sluice-rpc/sluice/internal/testkit/slogtest"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// invalidRequest sends c one GetCapacity with negative wants.
func invalidRequest(t *testing.T, c pb.CapacityClient) {
	t.Helper()
	_, err := c.GetCapacity(context.Background(), &pb.GetCapacityRequest{ClientId: proto.String("a"),
		Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(-1)}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("negative wants: %v, want InvalidArgument", err)
	}
}

// A client sending invalid requests by the hundred gets ratelog.Burst
// lines at Warn; the next line, once the rate allows, counts the rest.
func TestHostileClientCannotFloodTheLog(t *testing.T) {
	const flood = 100
	const msg = "WARN doorman server: refused an invalid request"
	clk := clock.NewFake(testEpoch)
	var log slogtest.Lines
	s, err := New(Config{Repository: testConfig(FairShare, 100), Clock: clk, Logger: log.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, startServer(t, s, ""))
	for range flood {
		invalidRequest(t, c)
	}
	if n := log.Count(msg); n != ratelog.Burst {
		t.Fatalf("%d invalid requests made %d lines, want %d (ratelog.Burst):\n%s", flood, n, ratelog.Burst, log.String())
	}
	clk.Add(time.Second)
	invalidRequest(t, c)
	if n, m := log.Count(msg), log.Count("suppressedBefore=90"); n != ratelog.Burst+1 || m != 1 {
		t.Fatalf("a second later: %d lines, %d counting 90 left out; want %d and 1:\n%s", n, m, ratelog.Burst+1, log.String())
	}
}

// With no Logger, a refused request is logged on slog.Default() at Warn,
// naming the RPC and the rule.
func TestLogsOnSlogDefault(t *testing.T) {
	var log slogtest.Lines
	prev := slog.Default()
	slog.SetDefault(log.Logger())
	defer slog.SetDefault(prev)
	s := newTestServer(t, testConfig(FairShare, 100), clock.NewFake(testEpoch))
	invalidRequest(t, dial(t, startServer(t, s, "")))
	if n := log.Count("WARN doorman server: refused an invalid request rpc=GetCapacity"); n != 1 {
		t.Fatalf("slog.Default() got:\n%s\nwant one Warn line naming GetCapacity", log.String())
	}
}

// With no ReloadConfig.Logger, a configuration refused on reload is
// printed at Warn on slog.Default(), naming the rule it breaks; one
// applied, at Info.
func TestReloaderLogsOnSlogDefault(t *testing.T) {
	var log slogtest.Lines
	prev := slog.Default()
	slog.SetDefault(log.Logger())
	defer slog.SetDefault(prev)
	r := NewReloader(newTestServer(t, testConfig(FairShare, 100), clock.NewFake(testEpoch)), ReloadConfig{})
	if err := r.Apply([]byte(reloadConfig("-1")), "test.yaml"); err == nil {
		t.Fatal("a negative capacity was applied")
	}
	if err := r.Apply([]byte(reloadConfig("40")), "test.yaml"); err != nil {
		t.Fatal(err)
	}
	if log.Count("WARN doorman server: configuration from test.yaml refused") != 1 || log.Count("capacity is -1") != 1 ||
		log.Count("INFO doorman server: configuration from test.yaml applied: 1 templates") != 1 {
		t.Fatalf("slog.Default() got:\n%s\nwant the refusal at Warn, naming the capacity, then the apply at Info", log.String())
	}
}
