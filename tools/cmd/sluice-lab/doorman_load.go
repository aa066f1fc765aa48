package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"github.com/sluice-rpc/sluice/tools/internal/childproc"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

var doormanLoadHelp = cli.Help{
	Synopsis: `sluice-lab doorman load --server HOST:PORT [--clients N] [--duration D] [-o json] [flags]`,
	About: `Measures a Doorman server's GetCapacity throughput: --clients distinct clients
renew their lease of --resource in turn (each with the lease it last got, a
share --change with new wants), as fast as --concurrency requests in flight
on --conns connections allow, for --duration, after each asked once
(--warmup). It prints the requests sent and answered per second (answered:
with an entry for the resource) and the latency quantiles
(tools/benchmarks/README.md has figures).

` + cli.OutputJSONHelp + `

Exit status: 0 when the run ended with every request answered by the
server (with or without an entry), 1 when a request failed or the server
could not be reached, 2 on a usage error.`,
	Examples: `sluice-lab doorman load --server 127.0.0.1:6000 --clients 1000 --duration 10s
sluice-lab doorman load --server 127.0.0.1:6000 --clients 10000 --resource kv-rps --change 0.1
sluice-lab doorman load --server 127.0.0.1:6000 --duration 5s -o json | jq .requests_per_s`,
}

var doormanFloodHelp = cli.Help{
	Synopsis: `sluice-lab doorman flood --server HOST:PORT [--ids N] [--server-pid PID] [-o json] [flags]
sluice-lab doorman flood --server HOST:PORT --ids 0 --side-for D [--server-pid PID]`,
	About: `Measures how a Doorman server bears a flood of new resource ids: --concurrency
workers send GetCapacity requests of --per-request new ids each until --ids
were sent, while a side client renews its lease of --side-resource every
--side-interval and times each answer. It prints the flood requests accepted
and refused (RESOURCE_EXHAUSTED: a server limit), the side client's latency
and, with --server-pid (Linux), the server's resident memory. To time the
server alone, run the side client in another process (--ids 0 --side-for D).

` + cli.OutputJSONHelp + `

Exit status: 0 when the flood ran (refusals are results, not failures), 1
when the server could not be reached or failed otherwise, 2 on a usage
error.`,
	Examples: `sluice-lab doorman flood --server 127.0.0.1:6000 --ids 1000000 --server-pid 4242
sluice-lab doorman flood --server 127.0.0.1:6000 --ids 100000 --per-request 100 --side-interval 5ms
sluice-lab doorman flood --server 127.0.0.1:6000 --ids 100000 -o json | jq .side.latency`,
}

// loadFlags are the flags load and flood share.
type loadFlags struct {
	fs                 *cli.FlagSet
	server             string
	concurrency, conns int
	tls                *cli.ClientTLSFlags
	output             func([]string) (bool, int, bool)
	dialOpts           []grpc.DialOption // set by parse
}

func addLoadFlags(fs *cli.FlagSet, concurrency int) *loadFlags {
	l := &loadFlags{fs: fs, tls: addDoormanClientTLSFlags(fs), output: cli.AddOutputFlag(fs, false).Parse}
	fs.StringVar(&l.server, "server", "", "`HOST:PORT` of a Doorman server")
	fs.IntVar(&l.concurrency, "concurrency", concurrency, "requests in flight, `N` >= 1")
	fs.IntVar(&l.conns, "conns", 4, "gRPC connections to the server, `N` >= 1")
	return l
}

// parse parses args and checks the shared flags, as output's Parse.
func (l *loadFlags) parse(args []string) (asJSON bool, code int, ok bool) {
	if asJSON, code, ok = l.output(args); !ok {
		return false, code, false
	}
	if l.server == "" {
		return false, l.fs.UsageError("--server is required"), false
	}
	if l.concurrency < 1 || l.conns < 1 {
		return false, l.fs.UsageError("--concurrency and --conns must be >= 1"), false
	}
	var err error
	if l.dialOpts, err = dialOptions(l.tls, l.fs.TLSReloadErrors()); err != nil {
		return false, l.fs.UsageError("%v", err), false
	}
	if l.dialOpts == nil {
		l.dialOpts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	return asJSON, cli.ExitOK, true
}

// dial opens --conns connections to --server, and extra more.
func (l *loadFlags) dial(extra int) ([]*grpc.ClientConn, error) {
	conns := make([]*grpc.ClientConn, 0, l.conns+extra)
	for range cap(conns) {
		c, err := grpc.NewClient(l.server, l.dialOpts...)
		if err != nil {
			closeAll(conns)
			return nil, err
		}
		conns = append(conns, c)
	}
	return conns, nil
}

func closeAll(conns []*grpc.ClientConn) {
	for _, c := range conns {
		c.Close()
	}
}

// work has l.concurrency workers make requests 0, 1, ... (do(w, k) makes
// request k on worker w, false to stop) until ctx ends or one failed.
func (l *loadFlags) work(ctx context.Context, failed *firstError, do func(w int, k int64) bool) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range l.concurrency {
		wg.Go(func() {
			for ctx.Err() == nil && failed.n.Load() == 0 && do(w, next.Add(1)-1) {
			}
		})
	}
	wg.Wait()
}

// rawMessage is a request already marshalled, sent through rawCodec.
type rawMessage []byte

// rawCodec sends rawMessages unchanged and drops the responses, which
// nobody reads.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*rawMessage), nil }
func (rawCodec) Unmarshal([]byte, any) error   { return nil }
func (rawCodec) Name() string                  { return "proto" }

// latencies are the durations of requests, kept for their quantiles.
type latencies []time.Duration

func (l latencies) String() string {
	q := l.quantiles()
	if q == nil {
		return "no requests"
	}
	ms := func(d millis.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + "ms" }
	return fmt.Sprintf("p50 %s p90 %s p99 %s p99.9 %s max %s", ms(q.P50), ms(q.P90), ms(q.P99), ms(q.P999), ms(q.Max))
}

// latencyQuantiles are the quantiles the table prints, in a JSON report.
type latencyQuantiles struct {
	Count int             `json:"count"`
	P50   millis.Duration `json:"p50_ms"`
	P90   millis.Duration `json:"p90_ms"`
	P99   millis.Duration `json:"p99_ms"`
	P999  millis.Duration `json:"p999_ms"`
	Max   millis.Duration `json:"max_ms"`
}

// quantiles returns l's quantiles (bench's, nearest rank), nil (null in
// JSON) when l is empty.
func (l latencies) quantiles() *latencyQuantiles {
	if len(l) == 0 {
		return nil
	}
	s := slices.Sorted(slices.Values(l))
	q := func(p float64) millis.Duration { return millis.Duration(load.Quantile(s, p)) }
	return &latencyQuantiles{Count: len(s), P50: q(0.5), P90: q(0.9), P99: q(0.99), P999: q(0.999), Max: q(1)}
}

// capacityRequest is client's request for wants of resource, holding has.
func capacityRequest(client, resource string, wants float64, has *pb.Lease) *pb.GetCapacityRequest {
	return &pb.GetCapacityRequest{ClientId: proto.String(client), Resource: []*pb.ResourceRequest{{
		ResourceId: proto.String(resource), Priority: proto.Int64(0), Wants: proto.Float64(wants), Has: has,
	}}}
}

// errText is err's message, nil (null in JSON) without one.
func errText(err error) *string {
	if err == nil {
		return nil
	}
	return new(err.Error())
}

// firstError keeps the first of concurrent errors, and counts them.
type firstError struct {
	once sync.Once
	err  error
	n    atomic.Int64
}

func (f *firstError) set(err error) {
	f.n.Add(1)
	f.once.Do(func() { f.err = err })
}

func doormanLoad(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice-lab doorman load", doormanLoadHelp, stdout, stderr)
	lf := addLoadFlags(fs, 32)
	clients := fs.Int("clients", 1000, "distinct clients renewing in turn, `N` >= 1")
	resource := fs.String("resource", "r", "the resource `ID` every client leases")
	wants := fs.Float64("wants", 10, "each client's wants, `N` >= 0")
	change := fs.Float64("change", 0.1, "the share of requests that change the client's wants, `P` in [0, 1]")
	duration := fs.Duration("duration", 10*time.Second, "how long to measure, `D` > 0")
	prefix := fs.String("client-prefix", "load-", "client ids are `PREFIX`0, PREFIX1, ...")
	warmup := fs.Bool("warmup", true, "have every client ask once before the clock starts")
	asJSON, code, ok := lf.parse(args)
	if !ok {
		return code
	}
	switch {
	case *clients < 1:
		return fs.UsageError("--clients is %d, must be >= 1", *clients)
	case *resource == "":
		return fs.UsageError("--resource is empty")
	case !(*wants >= 0):
		return fs.UsageError("--wants is %v, must be >= 0", *wants)
	case !(*change >= 0 && *change <= 1):
		return fs.UsageError("--change is %v, must be in [0, 1]", *change)
	case *duration <= 0:
		return fs.UsageError("--duration is %v, must be > 0", *duration)
	}
	conns, err := lf.dial(0)
	if err != nil {
		return fs.Failure("%v", err)
	}
	defer closeAll(conns)

	type client struct {
		mu    sync.Mutex
		id    string
		wants float64
		has   *pb.Lease
	}
	cs := make([]client, *clients)
	for i := range cs {
		cs[i].id, cs[i].wants = *prefix+strconv.Itoa(i), *wants
	}
	var answered, unanswered atomic.Int64
	var failed firstError
	// ask has client c renew its lease; ok says it got an answer, in took.
	ask := func(stub pb.CapacityClient, c *client, rng *rand.Rand) (took time.Duration, ok bool) {
		c.mu.Lock()
		if *change > 0 && rng.Float64() < *change {
			c.wants = *wants * (0.5 + rng.Float64())
		}
		req := capacityRequest(c.id, *resource, c.wants, c.has)
		c.mu.Unlock()
		start := time.Now()
		resp, err := stub.GetCapacity(ctx, req)
		took = time.Since(start)
		if err != nil {
			if ctx.Err() == nil {
				failed.set(err)
			}
			return took, false
		}
		if rs := resp.GetResponse(); len(rs) == 1 && rs[0].GetResourceId() == *resource {
			answered.Add(1)
			c.mu.Lock()
			c.has = rs[0].GetGets()
			c.mu.Unlock()
		} else {
			unanswered.Add(1)
		}
		return took, true
	}
	// run has the clients ask in turn until limit requests were sent, or
	// until until with no limit, and returns the requests' latencies.
	run := func(until time.Time, limit int64) latencies {
		out := make([]latencies, lf.concurrency)
		rngs, stubs := make([]*rand.Rand, lf.concurrency), make([]pb.CapacityClient, lf.concurrency)
		for w := range out {
			rngs[w], stubs[w] = rand.New(rand.NewPCG(uint64(w), 1)), pb.NewCapacityClient(conns[w%len(conns)])
		}
		lf.work(ctx, &failed, func(w int, k int64) bool {
			if (limit > 0 && k >= limit) || (limit == 0 && time.Now().After(until)) {
				return false
			}
			if took, ok := ask(stubs[w], &cs[k%int64(len(cs))], rngs[w]); ok {
				out[w] = append(out[w], took)
			}
			return true
		})
		return slices.Concat(out...)
	}
	if *warmup {
		run(time.Time{}, int64(len(cs)))
		answered.Store(0)
		unanswered.Store(0)
	}
	if failed.err != nil {
		return fs.Failure("%v", failed.err)
	}
	start := time.Now()
	all := run(start.Add(*duration), 0)
	took := time.Since(start)
	perS := func(n int64) float64 { return float64(n) / took.Seconds() }
	rep := doormanLoadReport{Clients: *clients, Resource: *resource, Concurrency: lf.concurrency, Connections: lf.conns,
		Elapsed: millis.Duration(took), Requests: len(all), RequestsPerS: perS(int64(len(all))),
		Answered: answered.Load(), AnsweredPerS: perS(answered.Load()), Unanswered: unanswered.Load(),
		Failed: failed.n.Load(), FirstError: errText(failed.err), Latency: all.quantiles()}
	if code := fs.Report(rep, asJSON, func(w io.Writer) error {
		fmt.Fprintf(w, "doorman load: %d clients of %q, %d in flight on %d connections, %.1fs\n", *clients, *resource, lf.concurrency, lf.conns, took.Seconds())
		fmt.Fprintf(w, "requests %d (%.0f/s), answered with an entry %d (%.0f/s), without %d, failed %d\nlatency %v\n",
			rep.Requests, rep.RequestsPerS, rep.Answered, rep.AnsweredPerS, rep.Unanswered, rep.Failed, all)
		return nil
	}, "", nil); code != cli.ExitOK || failed.err == nil {
		return code
	}
	return fs.Failure("%d requests failed, the first: %v", failed.n.Load(), failed.err)
}

// doormanLoadReport is `sluice-lab doorman load -o json`'s report.
// Answered requests had an entry for the resource, Unanswered none;
// FirstError is that of the Failed ones, null when none failed.
type doormanLoadReport struct {
	Clients      int               `json:"clients"`
	Resource     string            `json:"resource"`
	Concurrency  int               `json:"concurrency"`
	Connections  int               `json:"connections"`
	Elapsed      millis.Duration   `json:"elapsed_ms"`
	Requests     int               `json:"requests"`
	RequestsPerS float64           `json:"requests_per_s"`
	Answered     int64             `json:"answered"`
	AnsweredPerS float64           `json:"answered_per_s"`
	Unanswered   int64             `json:"unanswered"`
	Failed       int64             `json:"failed"`
	FirstError   *string           `json:"first_error"`
	Latency      *latencyQuantiles `json:"latency"` // null when no request was answered
}

// doormanFloodReport is `sluice-lab doorman flood -o json`'s report.
// Flood requests were Accepted (AcceptedIDs ids in them), Refused
// (RESOURCE_EXHAUSTED, the first for FirstRefusal) or Failed otherwise.
type doormanFloodReport struct {
	IDs          int                 `json:"ids"`
	PerRequest   int                 `json:"per_request"`
	FloodClients int                 `json:"flood_clients"`
	Concurrency  int                 `json:"concurrency"`
	Elapsed      millis.Duration     `json:"elapsed_ms"`
	Accepted     int64               `json:"accepted"`
	AcceptedIDs  int64               `json:"accepted_ids"`
	Refused      int64               `json:"refused"`
	Failed       int64               `json:"failed"`
	FirstRefusal *string             `json:"first_refusal"`
	Side         doormanFloodSide    `json:"side"`
	Server       *doormanFloodServer `json:"server"` // null without --server-pid
}

// doormanFloodSide is the side client's requests during the flood, with
// null for no latency (none answered) and no error.
type doormanFloodSide struct {
	Requests int               `json:"requests"`
	Answered int               `json:"answered"`
	Latency  *latencyQuantiles `json:"latency"`
	Error    *string           `json:"error"`
}

// doormanFloodServer is the server process's memory, in bytes.
type doormanFloodServer struct {
	PID            int   `json:"pid"`
	RSSBeforeBytes int64 `json:"rss_before_bytes"`
	RSSPeakBytes   int64 `json:"rss_peak_bytes"`
	RSSAfterBytes  int64 `json:"rss_after_bytes"`
	VMHWMBytes     int64 `json:"vm_hwm_bytes"`
}

func doormanFlood(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice-lab doorman flood", doormanFloodHelp, stdout, stderr)
	lf := addLoadFlags(fs, 2)
	ids := fs.Int("ids", 1_000_000, "new resource ids to send in all, `N` >= 1")
	perRequest := fs.Int("per-request", 1000, "new ids per request, `N` >= 1")
	floodClients := fs.Int("flood-clients", 1, "the flood's requests come from `N` client ids in turn")
	sideResource := fs.String("side-resource", "side", "the side client's resource `ID`")
	sideInterval := fs.Duration("side-interval", 10*time.Millisecond, "the side client's pause between requests, `D` > 0")
	sideFor := fs.Duration("side-for", 0, "keep the side client going for `D` from the start (default: until the flood ends); with --ids 0 and a flood from another process, it times the server alone")
	pid := fs.Int("server-pid", 0, "the server's process `ID`, to report its resident memory (Linux)")
	asJSON, code, ok := lf.parse(args)
	if !ok {
		return code
	}
	switch {
	case *ids < 0 || *perRequest < 1 || *floodClients < 1:
		return fs.UsageError("--ids must be >= 0, --per-request and --flood-clients >= 1")
	case *ids == 0 && *sideFor <= 0:
		return fs.UsageError("--ids 0 (no flood) needs --side-for, how long to time the side client")
	case *sideFor < 0:
		return fs.UsageError("--side-for is %v, must be >= 0", *sideFor)
	case *sideInterval <= 0:
		return fs.UsageError("--side-interval is %v, must be > 0", *sideInterval)
	case *sideResource == "":
		return fs.UsageError("--side-resource is empty")
	}
	var server *doormanFloodServer
	if *pid != 0 {
		rss, _, err := childproc.Memory(*pid)
		if err != nil {
			return fs.UsageError("--server-pid %d: %v", *pid, err)
		}
		server = &doormanFloodServer{PID: *pid, RSSBeforeBytes: rss}
	}
	conns, err := lf.dial(1)
	if err != nil {
		return fs.Failure("%v", err)
	}
	defer closeAll(conns)
	side := pb.NewCapacityClient(conns[0])
	conns = conns[1:]
	// ask renews the side client's lease and says whether the answer had an
	// entry.
	var has *pb.Lease
	ask := func() (bool, error) {
		resp, err := side.GetCapacity(ctx, capacityRequest("side", *sideResource, 1, has))
		rs := resp.GetResponse()
		if err == nil && len(rs) == 1 {
			has = rs[0].GetGets()
		}
		return len(rs) == 1, err
	}
	// The side client's lease exists before the flood.
	if _, err := ask(); err != nil {
		return fs.Failure("the side client's first request: %v", err)
	}

	// The flood's requests, marshalled before the clock starts, so that the
	// flood costs this process little CPU beside the server's.
	per := *perRequest
	floodReqs := make([]rawMessage, (*ids+per-1)/per)
	for k := range floodReqs {
		req := &pb.GetCapacityRequest{ClientId: proto.String("flood-" + strconv.Itoa(k%*floodClients))}
		for i := k * per; i < min((k+1)*per, *ids); i++ {
			req.Resource = append(req.Resource, &pb.ResourceRequest{
				ResourceId: proto.String("flood-" + strconv.Itoa(i)), Priority: proto.Int64(0), Wants: proto.Float64(1),
			})
		}
		floodReqs[k], _ = proto.Marshal(req) // ids of ASCII: it cannot fail
	}

	var accepted, acceptedIDs atomic.Int64
	var failed, refused firstError
	floodDone := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(floodDone)
		lf.work(ctx, &failed, func(w int, k int64) bool {
			if k >= int64(len(floodReqs)) {
				return false
			}
			err := conns[w%len(conns)].Invoke(ctx, "/doorman.Capacity/GetCapacity", &floodReqs[k], new(rawMessage), grpc.ForceCodec(rawCodec{}))
			switch {
			case err == nil:
				accepted.Add(1)
				acceptedIDs.Add(int64(min(per, *ids-int(k)*per)))
			case status.Code(err) == codes.ResourceExhausted:
				refused.set(err)
			case ctx.Err() == nil:
				failed.set(err)
			}
			return true
		})
	}()

	// The side client, and the server's memory, while the flood lasts.
	var sideLat latencies
	var sideAnswered int
	var sideErr error
	stop := (<-chan struct{})(floodDone)
	if *sideFor > 0 {
		sideCtx, cancel := context.WithTimeout(ctx, *sideFor)
		defer cancel()
		stop = sideCtx.Done()
	}
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		case <-ctx.Done():
			done = true
		case <-time.After(*sideInterval):
		}
		t0 := time.Now()
		answered, err := ask()
		if err != nil {
			if ctx.Err() == nil && sideErr == nil {
				sideErr = err
			}
			continue
		}
		sideLat = append(sideLat, time.Since(t0))
		if answered {
			sideAnswered++
		}
		if server != nil {
			if rss, _, err := childproc.Memory(*pid); err == nil {
				server.RSSPeakBytes = max(server.RSSPeakBytes, rss)
			}
		}
	}
	<-floodDone
	took := time.Since(start)
	rep := doormanFloodReport{IDs: *ids, PerRequest: *perRequest, FloodClients: *floodClients, Concurrency: lf.concurrency,
		Elapsed: millis.Duration(took), Accepted: accepted.Load(), AcceptedIDs: acceptedIDs.Load(),
		Refused: refused.n.Load(), Failed: failed.n.Load(), Server: server,
		Side: doormanFloodSide{Requests: len(sideLat), Answered: sideAnswered, Latency: sideLat.quantiles(), Error: errText(sideErr)}}
	if refused.err != nil {
		rep.FirstRefusal = new(status.Convert(refused.err).Message())
	}
	if server != nil {
		if server.RSSAfterBytes, server.VMHWMBytes, err = childproc.Memory(*pid); err != nil {
			return fs.Failure("reading the server's memory: %v", err)
		}
		server.RSSPeakBytes = max(server.RSSPeakBytes, server.RSSAfterBytes)
	}
	if code := fs.Report(rep, asJSON, func(w io.Writer) error {
		fmt.Fprintf(w, "doorman flood: %d ids in requests of %d from %d client(s), %d in flight, %.1fs\n", *ids, *perRequest, *floodClients, lf.concurrency, took.Seconds())
		fmt.Fprintf(w, "flood requests accepted %d (%d ids), refused %d, failed %d\n", rep.Accepted, rep.AcceptedIDs, rep.Refused, rep.Failed)
		if rep.FirstRefusal != nil {
			fmt.Fprintf(w, "first refusal: %s\n", *rep.FirstRefusal)
		}
		fmt.Fprintf(w, "side client: %d requests, %d answered with an entry, latency %v\n", len(sideLat), sideAnswered, sideLat)
		if m := rep.Server; m != nil {
			fmt.Fprintf(w, "server pid %d: RSS %d MB before, %d MB at the peak seen (VmHWM %d MB), %d MB after\n",
				m.PID, m.RSSBeforeBytes>>20, m.RSSPeakBytes>>20, m.VMHWMBytes>>20, m.RSSAfterBytes>>20)
		}
		return nil
	}, "", nil); code != cli.ExitOK {
		return code
	}
	if failed.err != nil {
		return fs.Failure("%d flood requests failed, the first: %v", failed.n.Load(), failed.err)
	}
	if sideErr != nil {
		return fs.Failure("the side client failed: %v", sideErr)
	}
	return cli.ExitOK
}
