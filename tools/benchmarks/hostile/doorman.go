package hostile

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// The Doorman attacks' names and sources.
const (
	// doormanResource is the resource every Doorman request asks for.
	doormanResource = "hostile"
	// floodSource is the flooding clients' source address; newSource the
	// newcomers'. The target is always 127.0.0.1.
	floodSource = "127.0.0.2"
	newSource   = "127.0.0.3"
	// doormanCallLimit bounds one Doorman request.
	doormanCallLimit = 10 * time.Second
)

// dialDoorman opens a gRPC connection to addr from source ("" for any).
func dialDoorman(addr, source string) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if source != "" {
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
			return d.DialContext(ctx, "tcp", a)
		}))
	}
	return grpc.NewClient(addr, opts...)
}

// capacityRequest is client's request for doormanResource.
func capacityRequest(client string, has *pb.Lease) *pb.GetCapacityRequest {
	return &pb.GetCapacityRequest{ClientId: proto.String(client), Resource: []*pb.ResourceRequest{{
		ResourceId: proto.String(doormanResource), Priority: proto.Int64(0), Wants: proto.Float64(1), Has: has,
	}}}
}

// askCapacity sends one request and returns the lease it got, and the
// outcome it is counted under: "lease", "no lease" (an answer without
// one) or the gRPC code of the failure.
func askCapacity(ctx context.Context, stub pb.CapacityClient, client string, has *pb.Lease) (*pb.Lease, string, error) {
	ctx, cancel := context.WithTimeout(ctx, doormanCallLimit)
	defer cancel()
	resp, err := stub.GetCapacity(ctx, capacityRequest(client, has))
	if err != nil {
		return nil, status.Code(err).String(), err
	}
	for _, r := range resp.GetResponse() {
		if r.GetResourceId() == doormanResource {
			return r.GetGets(), "lease", nil
		}
	}
	return nil, "no lease", nil
}

// runDoormanSilent holds e.p.conns silent TCP connections to a Doorman
// server, then runs `sluice doorman get` against it.
func runDoormanSilent(e *env) error {
	p := e.p
	e.before()
	s := e.sample()
	start := time.Now()
	attackers, err := e.holdConns(e.t.Addr, "", p.conns, false)
	defer func() {
		for _, a := range attackers {
			a.stop()
		}
	}()
	if err != nil {
		e.peaks(s)
		return err
	}
	e.r.Conns.ReadyIn = millis.Duration(time.Since(start))
	e.logf("%s", e.r.Conns)
	get, err := e.doormanGet(p.getTimeout)
	if err != nil {
		e.peaks(s)
		return err
	}
	e.r.Legit = &get
	if rest := p.hold - time.Since(start); rest > 0 {
		err = e.pause(rest)
	}
	e.leave(attackers, start)
	e.peaks(s)
	if err == nil {
		err = e.pause(p.settle)
	}
	e.after()
	e.connFigures()
	e.r.fig("a new `sluice doorman get`", "%s", e.r.Legit)
	return err
}

// doormanGet runs `sluice doorman get` against the target, killing it
// after limit.
func (e *env) doormanGet(limit time.Duration) (Call, error) {
	bin, err := e.bin()
	if err != nil {
		return Call{}, err
	}
	ctx, cancel := context.WithTimeout(e.ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "doorman", "get", "--server", e.t.Addr, "--resource", doormanResource, "--wants", "1")
	cmd.Env = append(os.Environ(), ChildEnv+"=")
	stderr, err := newStderrFile()
	if err != nil {
		return Call{}, err
	}
	defer stderr.close()
	cmd.Stderr = stderr.f
	start := time.Now()
	runErr := cmd.Run()
	c := Call{Latency: millis.Duration(time.Since(start)), OK: runErr == nil}
	switch {
	case ctx.Err() != nil:
		c.Code, c.Err = "TIMEOUT", fmt.Sprintf("no answer within %v, killed", limit)
	case runErr != nil:
		c.Code, c.Err = "FAILED", stderr.last()
	}
	return c, nil
}

// runDoormanFlood has an attacker child from floodSource register
// e.p.floodIDs client ids and renew their leases continuously, then asks
// for capacity for e.p.floodNew new clients from newSource.
func runDoormanFlood(e *env) error {
	p := e.p
	e.before()
	s := e.sample()
	start := time.Now()
	a, err := startAttacker(job{Kind: "flood", Target: e.t.Addr, Source: floodSource, Count: p.floodIDs, Workers: 32, Conns: 4})
	if err != nil {
		e.peaks(s)
		return err
	}
	defer a.stop()
	ready, err := a.next("ready", readyLimit, nil)
	if err != nil {
		e.peaks(s)
		return err
	}
	e.logf("%d flood ids registered in %.1fs: %s", ready.Sent, time.Since(start).Seconds(), countList(ready.Got))
	cc, err := dialDoorman(e.t.Addr, newSource)
	if err != nil {
		e.peaks(s)
		return err
	}
	stub := pb.NewCapacityClient(cc)
	outcomes := map[string]int{}
	var lat []time.Duration
	firstRefusal := ""
	for i := 0; i < p.floodNew && e.ctx.Err() == nil; i++ {
		t0 := time.Now()
		_, o, err := askCapacity(e.ctx, stub, "new-"+strconv.Itoa(i), nil)
		lat = append(lat, time.Since(t0))
		outcomes[o]++
		if err != nil && firstRefusal == "" {
			firstRefusal = status.Convert(err).Message()
		}
	}
	cc.Close()
	done, lerr := a.leave(leaveLimit)
	if lerr != nil {
		e.r.problem("the flood leaving: %v", lerr)
	}
	e.peaks(s)
	err = e.pause(p.settle)
	e.after()
	e.r.fig(fmt.Sprintf("flood: %d client ids from %s", p.floodIDs, floodSource), "%s, in %s", countList(ready.Got), sec(time.Duration(ready.At-start.UnixNano())))
	if ready.Note != "" {
		e.r.fig("flood's first refusal", "%s", ready.Note)
	}
	e.r.fig("flood renewals meanwhile", "%d: %s", done.Sent, countList(done.Got))
	e.r.fig(fmt.Sprintf("new clients from %s", newSource), "%s of %d; p50 %s p99 %s", countList(outcomes), p.floodNew,
		ms(quantile(lat, 0.5)), ms(quantile(lat, 0.99)))
	if firstRefusal != "" {
		e.r.fig("a new client's first refusal", "%s", firstRefusal)
	}
	e.r.Probe = &Load{Calls: p.floodNew, OK: outcomes["lease"], P50: millis.Duration(quantile(lat, 0.5)), P99: millis.Duration(quantile(lat, 0.99)), Max: millis.Duration(quantile(lat, 1))}
	return err
}

// childFlood is the attacker child of "doorman-flood": j.Count client ids
// from j.Source each ask for a lease once ("ready"), then renew them in
// turn until told to leave.
func childFlood(ctx context.Context, j job, out *emitter, leave <-chan struct{}) error {
	var stubs []pb.CapacityClient
	for i := 0; i < max(1, j.Conns); i++ {
		cc, err := dialDoorman(j.Target, j.Source)
		if err != nil {
			return err
		}
		defer cc.Close()
		stubs = append(stubs, pb.NewCapacityClient(cc))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	has := make([]*pb.Lease, j.Count)
	var stopping atomic.Bool
	pass := func() (int64, map[string]int64, string) {
		var next, n atomic.Int64
		var mu sync.Mutex
		got := map[string]int64{}
		first := ""
		var wg sync.WaitGroup
		for w := 0; w < max(1, j.Workers); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stub := stubs[w%len(stubs)]
				for !stopping.Load() {
					i := next.Add(1) - 1
					if i >= int64(j.Count) {
						return
					}
					lease, o, err := askCapacity(ctx, stub, "flood-"+strconv.FormatInt(i, 10), has[i])
					if stopping.Load() {
						return // cut short by leaving: not counted
					}
					has[i] = lease
					n.Add(1)
					mu.Lock()
					got[o]++
					if err != nil && first == "" {
						first = o + ": " + status.Convert(err).Message()
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return n.Load(), got, first
	}
	sent, got, first := pass()
	out.emit(event{Ev: "ready", Sent: sent, Got: got, Note: first})
	go func() {
		<-leave
		stopping.Store(true)
		cancel()
	}()
	renewed := map[string]int64{}
	var total int64
	for !stopping.Load() {
		n, g, _ := pass()
		total += n
		for k, v := range g {
			renewed[k] += v
		}
	}
	out.emit(event{Ev: "done", Sent: total, Got: renewed})
	return nil
}
