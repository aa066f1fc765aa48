package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/clitest"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/leasing/server"
	"github.com/sluice-rpc/sluice/tools/internal/testkit/testhttp"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "doorman.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

const testDoormanConfig = `
resources:
- identifier_glob: "db"
  capacity: 100
  algorithm:
    kind: FAIR_SHARE
    lease_length: 60
    refresh_interval: 15
    learning_mode_duration: 0
`

func TestDoormanServeAndGet(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	addr, debugAddr := startDoormanDebug(t, "--config", writeConfig(t, testDoormanConfig), "--listen", "127.0.0.1:0")

	var getOut, getErr bytes.Buffer
	code := cli.UntilInterrupted(doormanRun)([]string{"get", "--server", addr, "--resource", "db", "--wants", "30", "--client-id", "cli"}, &getOut, &getErr)
	if code != 0 {
		t.Fatalf("get exited %d: %s", code, getErr.String())
	}
	if got := getOut.String(); !strings.Contains(got, "client=cli resource=db wants=30 capacity=30") {
		t.Fatalf("get printed %q", got)
	}

	// The status page and the server's metrics share the debug listener.
	if page := testhttp.OK(t, "http://"+debugAddr+"/status"); !strings.Contains(page, `resource "db"`) {
		t.Errorf("/status:\n%s", page)
	}
	answered := regexp.MustCompile(`(?m)^lease_requests [1-9]`)
	testwait.Until(t, "/metrics to count the request the server answered", func() bool {
		return answered.MatchString(testhttp.OK(t, "http://"+debugAddr+"/metrics"))
	})

	// get released its lease on exit, so a watcher gets it all; --watch
	// prints each lease and ends with its context.
	wctx, wcancel := context.WithCancel(context.Background())
	var watchOut syncBuffer
	wexit := make(chan int, 1)
	go func() {
		wexit <- doormanRun(wctx, []string{"get", "--server", addr, "--resource", "db", "--wants", "200", "--client-id", "watcher", "--watch"}, &watchOut, &getErr)
	}()
	testwait.Until(t, "the watcher to print capacity=100", func() bool { return strings.Contains(watchOut.String(), "capacity=100") })
	wcancel()
	if code := testwait.Recv(t, wexit, "get --watch to exit"); code != 0 {
		t.Fatalf("get --watch exited %d", code)
	}
}

// --max-conns reaches the server: 200 sockets that connect and say
// nothing are closed down to the cap, as /metrics counts, and `doorman
// get` is answered.
func TestDoormanServeCapsConnections(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	addr, debugAddr := startDoormanDebug(t, "--config", writeConfig(t, testDoormanConfig), "--listen", "127.0.0.1:0",
		"--max-conns", "50", "--handshake-timeout", "1m")
	for range 200 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	var getOut, getErr bytes.Buffer
	if code := cli.UntilInterrupted(doormanRun)([]string{"get", "--server", addr, "--resource", "db", "--wants", "30", "--client-id", "late"}, &getOut, &getErr); code != 0 {
		t.Fatalf("get exited %d: %s", code, getErr.String())
	}
	if got := getOut.String(); !strings.Contains(got, "client=late resource=db wants=30 capacity=30") {
		t.Fatalf("get printed %q", got)
	}
	evicted := regexp.MustCompile(`(?m)^lease_server_conns_closed\{reason="evicted"\} (\d+)$`)
	testwait.Until(t, "/metrics to count 150 connections evicted or more", func() bool {
		m := evicted.FindStringSubmatch(testhttp.OK(t, "http://"+debugAddr+"/metrics"))
		n := 0
		if m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		return n >= 150
	})
}

func TestDoormanErrors(t *testing.T) {
	bad := writeConfig(t, `
resources:
- identifier_glob: "*"
  capacity: 1
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15}
- identifier_glob: "x"
  capacity: 1
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15}
`)
	tests := []struct {
		args    []string
		code    int
		message string
	}{
		{nil, 2, "sluice-lab doorman: missing command"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--status", "127.0.0.1:0"}, 2, "flag provided but not defined: -status"},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--debug-listen", "nope"}, 2, `--debug-listen "nope"`},
		{[]string{"serve"}, 2, "--config and --listen are required"},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0"}, 1, `template 0 ("*")`},
		{[]string{"serve", "--config", "/nonexistent.yaml", "--listen", "127.0.0.1:0"}, 1, "reading configuration"},
		{[]string{"serve", "--listen", "127.0.0.1:0"}, 2, "--config and --listen are required (--config may be left out with --parent)"},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--parent", "nohostport"}, 2, `--parent "nohostport": want HOST:PORT`},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--parent", ":6000"}, 2, `--parent ":6000": want HOST:PORT with both`},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--election-key", "/k"}, 2, "--election-key needs --etcd"},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--etcd", "127.0.0.1:2379,", "--election-key", "/k"}, 2, `--etcd "127.0.0.1:2379,": endpoint 2 is empty`},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--etcd", "127.0.0.1:2379", "--election-key", "/"}, 2, `--election-key "/" names no key`},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--etcd", "127.0.0.1:2379", "--election-key", "/k", "--election-ttl", "1500ms"}, 2, "--election-ttl is 1.5s, must be a whole number of seconds >= 1s"},
		{[]string{"serve", "--config", bad, "--listen", ":6000", "--etcd", "127.0.0.1:2379", "--election-key", "/k"}, 2, `--listen ":6000" names no host for clients to be sent to: give --advertise HOST:PORT`},
		{[]string{"serve", "--config", bad, "--listen", "0.0.0.0:6000", "--etcd", "127.0.0.1:2379", "--election-key", "/k", "--advertise", "x"}, 2, `--advertise "x": want HOST:PORT`},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--max-conns", "-1"}, 2, "--max-conns is -1, must be >= 0 (0: the default)"},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--max-calls-per-conn", "-1"}, 2, "--max-calls-per-conn is -1, must be >= 0"},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--max-calls-per-conn", "4294967296"}, 2, "--max-calls-per-conn is 4294967296, must be <= 4294967295"},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--max-calls-per-conn", "4294967296", "--idle-timeout", "-1s"}, 2, "--max-calls-per-conn is 4294967296, must be <= 4294967295"}, // in the flags' order
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--handshake-timeout", "-1s"}, 2, "--handshake-timeout is -1s, must be >= 0"},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--idle-timeout", "-1s"}, 2, "--idle-timeout is -1s, must be >= 0"},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--keepalive-min-time", "-1s"}, 2, "--keepalive-min-time is -1s, must be >= 0"},
		{[]string{"get", "--server", "127.0.0.1:1"}, 2, "--wants (>= 0) are required"},
		{[]string{"get", "--server", "127.0.0.1:1", "--resource", "r", "--wants", "1"}, 1, "sluice-lab doorman get:"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := doormanRun(context.Background(), tt.args, &out, &errOut)
		if code != tt.code || !strings.Contains(errOut.String(), tt.message) {
			t.Errorf("doorman %v: exit %d, stderr %q; want exit %d and %q", tt.args, code, errOut.String(), tt.code, tt.message)
		}
	}
}

// startDoorman runs `sluice-lab doorman serve` in process on 127.0.0.1 with the
// configuration text and extra flags, and returns its address; it stops
// with the test, which checks that it exited 0.
func startDoorman(t *testing.T, config string, flags ...string) string {
	t.Helper()
	addr, _, _ := startDoormanArgs(t, append([]string{"--config", writeConfig(t, config), "--listen", "127.0.0.1:0"}, flags...)...)
	return addr
}

func dialDoorman(t *testing.T, addr string) pb.CapacityClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewCapacityClient(cc)
}

const replayConfig = `
resources:
- identifier_glob: "fair"
  capacity: 100
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 5, learning_mode_duration: 0}
- identifier_glob: "prop"
  capacity: 90
  safe_capacity: 3
  algorithm: {kind: 2, lease_length: 30, refresh_interval: 2, learning_mode_duration: 0}
- identifier_glob: "static-*"
  capacity: 10
  algorithm: {kind: STATIC, lease_length: 5, refresh_interval: 5, learning_mode_duration: 0}
- identifier_glob: "*"
  capacity: 50
  algorithm: {kind: FAIR_SHARE, lease_length: 20, refresh_interval: 4, learning_mode_duration: 0}
`

// A replay of random request sequences from the same clients (the
// original client's shapes: all its resources at once, with the lease last
// received; releases with empty ids; an intermediate's GetServerCapacity),
// sent back to back with no pause, gets from the CLI server the very
// entries an in-process server with the same configuration gives: every
// renewal answered, the same capacities and safe capacities, expiries
// within 1 s, and GetServerCapacity the same share and algorithm.
func TestDoormanServeReplaysLikeInProcess(t *testing.T) {
	cli := dialDoorman(t, startDoorman(t, replayConfig))
	repo, err := server.ParseRepository([]byte(replayConfig))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Repository: repo})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); testwait.Recv(t, served, "the in-process server to stop") })
	local := dialDoorman(t, lis.Addr().String())

	type key struct{ client, resource string }
	targets := []struct {
		name string
		stub pb.CapacityClient
		has  map[key]*pb.Lease
	}{{"cli", cli, map[key]*pb.Lease{}}, {"in-process", local, map[key]*pb.Lease{}}}
	resources := []string{"fair", "prop", "static-a", "static-b", "other-1", "other-2"}
	rng := rand.New(rand.NewPCG(13, 13))
	ctx := context.Background()
	var gets, releases, serverGets int
	for op := 0; op < 1500; op++ {
		client := fmt.Sprintf("client-%d", rng.IntN(12))
		switch x := rng.IntN(20); {
		case x == 0: // the original client's Close
			ids := []string{resources[rng.IntN(len(resources))], resources[rng.IntN(len(resources))]}
			if ids[0] == ids[1] {
				ids = ids[:1]
			}
			req := &pb.ReleaseCapacityRequest{ClientId: proto.String(client), ResourceId: append(make([]string, len(ids)), ids...)}
			for _, tg := range targets {
				if _, err := tg.stub.ReleaseCapacity(ctx, req); err != nil {
					t.Fatalf("op %d: %s: ReleaseCapacity %q: %v", op, tg.name, req.ResourceId, err)
				}
				for _, id := range ids {
					delete(tg.has, key{client, id})
				}
			}
			releases++
		case x == 1: // an intermediate server
			id := resources[rng.IntN(len(resources))]
			bands := []*pb.PriorityBandAggregate{
				{Priority: proto.Int64(1), NumClients: proto.Int64(1 + rng.Int64N(4)), Wants: proto.Float64(rng.Float64() * 80)},
				{Priority: proto.Int64(2), NumClients: proto.Int64(1), Wants: proto.Float64(rng.Float64() * 20)},
			}
			var answers [2]*pb.ServerCapacityResourceResponse
			for i, tg := range targets {
				resp, err := tg.stub.GetServerCapacity(ctx, &pb.GetServerCapacityRequest{ServerId: proto.String("mid"),
					Resource: []*pb.ServerCapacityResourceRequest{{ResourceId: proto.String(id), Has: tg.has[key{"mid", id}], Wants: bands}}})
				if err != nil || len(resp.Response) != 1 || resp.Mastership != nil {
					t.Fatalf("op %d: %s: GetServerCapacity: %v, %v", op, tg.name, resp, err)
				}
				answers[i] = resp.Response[0]
				tg.has[key{"mid", id}] = resp.Response[0].GetGets()
			}
			if !proto.Equal(answers[0].GetAlgorithm(), answers[1].GetAlgorithm()) || answers[0].GetAlgorithm() == nil {
				t.Fatalf("op %d: GetServerCapacity algorithms differ: %v vs %v", op, answers[0].GetAlgorithm(), answers[1].GetAlgorithm())
			}
			compareLeases(t, op, id, answers[0].GetGets(), answers[1].GetGets(), answers[0].GetSafeCapacity(), answers[1].GetSafeCapacity())
			serverGets++
		default: // GetCapacity for a few resources, with what it has
			n := 1 + rng.IntN(3)
			perm := rng.Perm(len(resources))[:n]
			wants := make([]float64, n)
			for i := range wants {
				wants[i] = math.Round(rng.Float64()*60*4) / 4
			}
			var answers [2]map[string]*pb.ResourceResponse
			for i, tg := range targets {
				req := &pb.GetCapacityRequest{ClientId: proto.String(client)}
				for j, p := range perm {
					req.Resource = append(req.Resource, &pb.ResourceRequest{ResourceId: proto.String(resources[p]),
						Priority: proto.Int64(0), Wants: proto.Float64(wants[j]), Has: tg.has[key{client, resources[p]}]})
				}
				resp, err := tg.stub.GetCapacity(ctx, req)
				if err != nil || resp.Mastership != nil {
					t.Fatalf("op %d: %s: GetCapacity: %v, %v", op, tg.name, resp, err)
				}
				answers[i] = map[string]*pb.ResourceResponse{}
				for _, r := range resp.Response {
					answers[i][r.GetResourceId()] = r
					tg.has[key{client, r.GetResourceId()}] = r.GetGets()
				}
				if len(answers[i]) != n {
					t.Fatalf("op %d: %s answered %d of the %d resources asked for (a dropped renewal)", op, tg.name, len(answers[i]), n)
				}
			}
			for id, a := range answers[0] {
				b := answers[1][id]
				compareLeases(t, op, id, a.GetGets(), b.GetGets(), a.GetSafeCapacity(), b.GetSafeCapacity())
			}
			gets++
		}
	}
	t.Logf("replayed %d GetCapacity, %d GetServerCapacity and %d ReleaseCapacity requests", gets, serverGets, releases)
}

func compareLeases(t *testing.T, op int, id string, a, b *pb.Lease, safeA, safeB float64) {
	t.Helper()
	if math.Abs(a.GetCapacity()-b.GetCapacity()) > 1e-9 || a.GetRefreshInterval() != b.GetRefreshInterval() ||
		math.Abs(float64(a.GetExpiryTime()-b.GetExpiryTime())) > 1 || math.Abs(safeA-safeB) > 1e-9 {
		t.Fatalf("op %d: %s: the CLI server's lease %v (safe %v), the in-process server's %v (safe %v)", op, id, a, safeA, b, safeB)
	}
}

// The limits are flags: beyond them the CLI server refuses with
// RESOURCE_EXHAUSTED and a message naming the flag.
func TestDoormanServeLimits(t *testing.T) {
	stub := dialDoorman(t, startDoorman(t, testDoormanConfig, "--max-resources", "2", "--max-clients", "5", "--max-leases", "10"))
	ask := func(client string, ids ...string) error {
		req := &pb.GetCapacityRequest{ClientId: proto.String(client)}
		for _, id := range ids {
			req.Resource = append(req.Resource, &pb.ResourceRequest{ResourceId: proto.String(id), Priority: proto.Int64(0), Wants: proto.Float64(1)})
		}
		_, err := stub.GetCapacity(context.Background(), req)
		return err
	}
	if err := ask("a", "db", "x"); err != nil {
		t.Fatal(err)
	}
	err := ask("a", "y")
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "limit of 2 resources (Config.MaxResources, --max-resources)") {
		t.Fatalf("a third resource: %v, want RESOURCE_EXHAUSTED naming --max-resources", err)
	}
	if err := ask("a", "db", "x"); err != nil {
		t.Fatalf("a renewal at the limit: %v", err)
	}
}

// load measures renewals answered; flood floods and times a side client,
// and reports the server's memory.
func TestDoormanLoadAndFlood(t *testing.T) {
	addr := startDoorman(t, testDoormanConfig, "--max-resources", "500")
	var out, errOut bytes.Buffer
	code := doormanRun(context.Background(), []string{"load", "--server", addr, "--resource", "db", "--clients", "50",
		"--duration", "200ms", "--concurrency", "4", "--conns", "2"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("load exited %d: %s%s", code, out.String(), errOut.String())
	}
	m := regexp.MustCompile(`requests (\d+) \(\d+/s\), answered with an entry (\d+) \(\d+/s\), without 0, failed 0`).FindStringSubmatch(out.String())
	if m == nil || m[1] != m[2] || m[1] == "0" {
		t.Fatalf("load printed:\n%s\nwant every request answered with an entry", out.String())
	}

	out.Reset()
	code = doormanRun(context.Background(), []string{"flood", "--server", addr, "--ids", "2000", "--per-request", "100",
		"--side-resource", "db", "--side-interval", "1ms", "--server-pid", strconv.Itoa(os.Getpid())}, &out, &errOut)
	if code != 0 {
		t.Fatalf("flood exited %d: %s%s", code, out.String(), errOut.String())
	}
	for _, want := range []*regexp.Regexp{
		// 499 resources fit beside db: 4 requests of 100, then refusals.
		regexp.MustCompile(`flood requests accepted 4 \(400 ids\), refused 16, failed 0`),
		regexp.MustCompile(`first refusal: doorman server: GetCapacity: the server's limit of 500 resources \(Config.MaxResources, --max-resources\) is reached`),
		regexp.MustCompile(`side client: (\d+) requests, (\d+) answered with an entry, latency p50`),
		regexp.MustCompile(`server pid \d+: RSS \d+ MB before, \d+ MB at the peak seen \(VmHWM \d+ MB\), \d+ MB after`),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("flood printed:\n%s\nwant a line matching %s", out.String(), want)
		}
	}
	if m := regexp.MustCompile(`side client: (\d+) requests, (\d+) answered`).FindStringSubmatch(out.String()); m == nil || m[1] != m[2] {
		t.Errorf("the side client's requests were not all answered: %v", m)
	}
}

// startDoormanArgs runs `sluice-lab doorman serve` with args in process and
// returns its address and its output; it stops with the test, which
// checks that it exited 0. stop stops it earlier.
func startDoormanArgs(t *testing.T, args ...string) (addr string, out *syncBuffer, stop func()) {
	t.Helper()
	addr, out, _, stop = startDoormanProc(t, args...)
	return addr, out, stop
}

// startDoormanDebug is startDoormanArgs with --debug-listen on a free port:
// it returns the server's address and its debug listener's, read from the
// line serve prints on stderr.
func startDoormanDebug(t *testing.T, args ...string) (addr, debugAddr string) {
	t.Helper()
	addr, _, errOut, _ := startDoormanProc(t, append(args, "--debug-listen", "127.0.0.1:0")...)
	debugRe := regexp.MustCompile(`(?m)^sluice-lab doorman serve: debug endpoints on http://(\S+)/ \(/metrics /debug/pprof/ /status\)$`)
	testwait.Until(t, "serve to say where its debug listener is", func() bool {
		if m := debugRe.FindStringSubmatch(errOut.String()); m != nil {
			debugAddr = m[1]
		}
		return debugAddr != ""
	})
	return addr, debugAddr
}

// startDoormanProc is startDoormanArgs, with serve's stderr too.
func startDoormanProc(t *testing.T, args ...string) (addr string, out, errOut *syncBuffer, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errOut = &syncBuffer{}, &syncBuffer{}
	exit, exited := make(chan int, 1), make(chan struct{})
	go func() {
		exit <- doormanRun(ctx, append([]string{"serve"}, args...), out, errOut)
		close(exited)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if code := testwait.Recv(t, exit, "sluice-lab doorman serve to exit"); code != 0 {
				t.Errorf("sluice-lab doorman serve exited %d: %s", code, errOut.String())
			}
		})
	}
	t.Cleanup(stop)
	re := regexp.MustCompile(`serving \d+ templates on (\S+)`)
	testwait.Until(t, "sluice-lab doorman serve to listen", func() bool {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		}
		select {
		case <-exited: // failed to start
			return true
		default:
			return addr != ""
		}
	})
	if addr == "" {
		t.Fatalf("sluice-lab doorman serve failed: %s", errOut.String())
	}
	return addr, out, errOut, stop
}

// Two `sluice-lab doorman serve` on embedded etcd form one root node: one
// says it is the master, the other names it; an intermediate started with
// --parent pointing at the follower reaches the master, and a client of
// the intermediate gets its lease; when the master stops, the other
// server says it has taken over.
func TestDoormanServeTreeAndElection(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	et := startEtcd(t)
	file := writeConfig(t, testDoormanConfig)
	elect := []string{"--config", file, "--listen", "127.0.0.1:0", "--etcd", et.Endpoint, "--election-key", "/cli/root", "--election-ttl", "2s"}
	a, aOut, stopA := startDoormanArgs(t, elect...)
	testwait.Until(t, "the first server to become master", func() bool {
		return strings.Contains(aOut.String(), "now the master (new state, learning mode) election=/cli/root")
	})
	b, bOut, _ := startDoormanArgs(t, elect...)
	testwait.Until(t, "the second server to name the master", func() bool {
		return strings.Contains(bOut.String(), "not the master election=/cli/root master="+a)
	})
	if !strings.Contains(aOut.String(), "(campaigning on /cli/root as "+a+", session TTL 2s)") {
		t.Errorf("serve's first line does not say it campaigns:\n%s", aOut.String())
	}

	mid, midOut, _ := startDoormanArgs(t, "--listen", "127.0.0.1:0", "--parent", b, "--server-id", "mid")
	if !strings.Contains(midOut.String(), "serving 0 templates on "+mid+" (intermediate under "+b+")") {
		t.Errorf("the intermediate's first line:\n%s", midOut.String())
	}
	wctx, wcancel := context.WithCancel(context.Background())
	var watchOut, watchErr syncBuffer
	wexit := make(chan int, 1)
	go func() {
		wexit <- doormanRun(wctx, []string{"get", "--server", mid, "--resource", "db", "--wants", "30", "--client-id", "leaf", "--watch"}, &watchOut, &watchErr)
	}()
	testwait.Until(t, "the intermediate's client to get 30", func() bool { return strings.Contains(watchOut.String(), "capacity=30") })
	wcancel()
	if code := testwait.Recv(t, wexit, "get --watch to exit"); code != 0 {
		t.Fatalf("get --watch exited %d: %s", code, watchErr.String())
	}

	stopA()
	testwait.Until(t, "the second server to take over", func() bool {
		return strings.Contains(bOut.String(), "now the master (new state, learning mode) election=/cli/root")
	})
}

// An intermediate whose parent refuses connections says so on its output
// once its first client makes it ask, and keeps serving.
func TestDoormanServeReportsParentFailure(t *testing.T) {
	// A parent that accepts connections and closes them at once: every
	// refresh fails. (A port closed after listening could be taken by
	// another test's server meanwhile, one that answers.)
	dead := testnet.AcceptClose(t).Addr()
	addr, out, _ := startDoormanArgs(t, "--listen", "127.0.0.1:0", "--parent", dead)
	// The client keeps its lease (--watch) until the report: a plain get
	// releases it as it exits, and an intermediate whose refresh loop had
	// not run by then (a loaded machine) has nothing to ask its parent.
	ctx, cancel := context.WithCancel(context.Background())
	var get syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- doormanRun(ctx, []string{"get", "--server", addr, "--resource", "r", "--wants", "5", "--watch"}, &get, &get)
	}()
	defer func() {
		cancel()
		if code := testwait.Recv(t, exit, "sluice-lab doorman get --watch to exit"); code != 0 {
			t.Errorf("sluice-lab doorman get --watch from the intermediate: exit %d: %s", code, get.String())
		}
		if t.Failed() {
			t.Logf("the intermediate's output:\n%s\nthe client's:\n%s", out.String(), get.String())
		}
	}()
	testwait.Until(t, "the intermediate to report its parent failing", func() bool {
		return strings.Contains(out.String(), "refreshing leases from the parent failed, retrying parent="+dead)
	})
}

// A server in learning mode (here its first minute: learning_mode_duration
// is left to its default, the lease length) grants a new client nothing.
// get says why, and until when at the latest: the lease's expiry, in the
// table and in the JSON; a server out of learning mode gets no note.
func TestDoormanGetSaysLearningMode(t *testing.T) {
	learning := startDoorman(t, `
resources:
- identifier_glob: "db"
  capacity: 100
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15}
`)
	var out, errOut bytes.Buffer
	if code := doormanRun(context.Background(), []string{"get", "--server", learning, "--resource", "db", "--wants", "30", "--client-id", "new"}, &out, &errOut); code != 0 {
		t.Fatalf("get exited %d: %s", code, errOut.String())
	}
	m := regexp.MustCompile(`(?m)^client=new resource=db wants=30 capacity=0 expires=(\S+)\nnote: capacity 0 for wants 30: the server is likely in learning mode, which ends by (\S+) \(this lease's expiry\) at the latest\. `).
		FindStringSubmatch(out.String())
	if m == nil || m[1] != m[2] {
		t.Fatalf("get printed:\n%s\nwant capacity 0 and a note that learning mode ends by the lease's expiry", out.String())
	}
	if !strings.Contains(out.String(), "inferred from the answer") {
		t.Errorf("the note does not say the learning mode is inferred:\n%s", out.String())
	}
	out.Reset()
	if code := doormanRun(context.Background(), []string{"get", "--server", learning, "--resource", "db", "--wants", "30", "-o", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("get -o json exited %d: %s", code, errOut.String())
	}
	var rep struct {
		Capacity           *float64 `json:"capacity"`
		Expires            string   `json:"expires"`
		LearningModeLikely bool     `json:"learning_mode_likely"`
		LearningModeEndsBy string   `json:"learning_mode_ends_by"`
		Note               string   `json:"note"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.Capacity == nil || *rep.Capacity != 0 || !rep.LearningModeLikely || rep.LearningModeEndsBy != rep.Expires || !strings.Contains(rep.Note, "learning mode") {
		t.Errorf("get -o json: %s\nwant capacity 0, learning mode likely, ending by the expiry", out.String())
	}

	// Out of learning mode (learning_mode_duration 0): the capacity, and
	// no note, null in JSON.
	ready := startDoorman(t, testDoormanConfig)
	out.Reset()
	if code := doormanRun(context.Background(), []string{"get", "--server", ready, "--resource", "db", "--wants", "30", "-o", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("get exited %d: %s", code, errOut.String())
	}
	var fields map[string]any
	if err := json.Unmarshal(out.Bytes(), &fields); err != nil {
		t.Fatal(err)
	}
	if fields["capacity"] != 30.0 || fields["learning_mode_likely"] != false || fields["note"] != nil || fields["learning_mode_ends_by"] != nil {
		t.Errorf("a server out of learning mode: %s", out.String())
	}
}

// doorman get, load and flood print their reports with -o json by sluice's
// convention: one JSON object on one line, snake_case keys.
func TestDoormanReportsAreSnakeCaseJSON(t *testing.T) {
	addr := startDoorman(t, testDoormanConfig)
	self := strconv.Itoa(os.Getpid())
	for _, args := range [][]string{
		{"get", "--server", addr, "--resource", "db", "--wants", "1"},
		{"load", "--server", addr, "--resource", "db", "--clients", "5", "--duration", "100ms"},
		{"flood", "--server", addr, "--ids", "100", "--per-request", "10", "--server-pid", self},
	} {
		var out, errOut bytes.Buffer
		if code := doormanRun(context.Background(), append(args, "-o", "json"), &out, &errOut); code != cli.ExitOK {
			t.Fatalf("doorman %s -o json: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		s := out.String()
		if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "}\n") {
			t.Errorf("doorman %s: want one JSON object on one line, got:\n%.300s", args[0], s)
		}
		var v map[string]any
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatalf("doorman %s: %v:\n%.500s", args[0], err, s)
		}
		if bad := clitest.BadKeys(v); len(bad) > 0 {
			t.Errorf("doorman %s: keys not in snake_case: %.10q", args[0], bad)
		}
	}
}

// doormanRun runs `sluice-lab doorman ...` until ctx ends.
func doormanRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.NewGroup("sluice-lab doorman", doormanHelp, doormanSubs(ctx)...).Run(args, stdout, stderr)
}
