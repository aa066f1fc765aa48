package hostile

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

const (
	// doormanResource is the resource the flood's and the malformed
	// attack's requests ask for.
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

// newClients has e.p.floodNew new clients from newSource ask once each
// with ask, which returns the outcome the call is counted under, and
// returns the outcomes, the latencies and the first refusal.
func (e *env) newClients(ask func(stub pb.CapacityClient, i string) (string, error)) (map[string]int, []time.Duration, string, error) {
	stub, err := e.doormanStub(newSource)
	if err != nil {
		return nil, nil, "", err
	}
	outcomes, refusal := map[string]int{}, ""
	var lat []time.Duration
	for i := 0; i < e.p.floodNew && e.ctx.Err() == nil; i++ {
		t0 := time.Now()
		o, err := ask(stub, strconv.Itoa(i))
		lat = append(lat, time.Since(t0))
		outcomes[o]++
		if err != nil && refusal == "" {
			refusal = status.Convert(err).Message()
		}
	}
	return outcomes, lat, refusal, nil
}

// newClientsFigures appends the new clients' figures, named name, and
// records them as the probe, those whose outcome is ok served.
func (e *env) newClientsFigures(name, ok string, outcomes map[string]int, lat []time.Duration, refusal string) {
	e.r.fig(name, "%s of %d; p50 %s p99 %s", countList(outcomes), e.p.floodNew, ms(quantile(lat, 0.5)), ms(quantile(lat, 0.99)))
	if refusal != "" {
		e.r.fig("a new client's first refusal", "%s", refusal)
	}
	e.r.Probe = latencyLoad(e.p.floodNew, outcomes[ok], lat, refusal)
}

// latencyLoad is a Load of calls, ok of them served, with the latencies
// lat.
func latencyLoad(calls, ok int, lat []time.Duration, firstErr string) *Load {
	return &Load{Calls: calls, OK: ok, P50: millis.Duration(quantile(lat, 0.5)), P99: millis.Duration(quantile(lat, 0.99)),
		Max: millis.Duration(quantile(lat, 1)), FirstError: firstErr}
}

// runDoormanSilent holds e.p.conns silent TCP connections to a Doorman
// server, then runs `sluice doorman get` against it.
func runDoormanSilent(e *env) error {
	p := e.p
	start := time.Now()
	attackers, err := e.holdConns("stall", e.t.Addr, "", false)
	if err != nil {
		return err
	}
	run, err := e.runSluice(p.getTimeout, nil, "doorman", "get", "--server", e.t.Addr, "--resource", doormanResource, "--wants", "1")
	if err != nil {
		return err
	}
	get := Call{Latency: millis.Duration(run.took), OK: run.err == nil}
	switch {
	case run.killed:
		get.Code, get.Err = "TIMEOUT", fmt.Sprintf("no answer within %v, killed", p.getTimeout)
	case run.err != nil:
		get.Code, get.Err = "FAILED", run.stderr.last()
	}
	e.r.Legit = &get
	if rest := p.hold - time.Since(start); rest > 0 {
		err = e.pause(rest)
	}
	e.leaveAll(attackers, start)
	err = e.end(err, p.settle)
	e.connFigures()
	e.r.fig("a new `sluice doorman get`", "%s", e.r.Legit)
	return err
}

// runDoormanFlood has an attacker child from floodSource register
// e.p.floodIDs client ids and renew their leases continuously, then asks
// for capacity for e.p.floodNew new clients from newSource.
func runDoormanFlood(e *env) error {
	p := e.p
	start := time.Now()
	a, err := e.attacker(job{Kind: "flood", Target: e.t.Addr, Source: floodSource, Count: p.floodIDs, Workers: 32, Conns: 4})
	if err != nil {
		return err
	}
	ready, err := a.next("ready", readyLimit)
	if err != nil {
		return err
	}
	e.logf("%d flood ids registered in %.1fs: %s", ready.Sent, time.Since(start).Seconds(), countList(ready.Got))
	outcomes, lat, refusal, err := e.newClients(func(stub pb.CapacityClient, i string) (string, error) {
		_, o, err := askCapacity(e.ctx, stub, "new-"+i, nil)
		return o, err
	})
	if err != nil {
		return err
	}
	done := e.leave(a)
	err = e.end(nil, p.settle)
	e.r.fig(fmt.Sprintf("flood: %d client ids from %s", p.floodIDs, floodSource), "%s, in %s", countList(ready.Got), sec(time.Duration(ready.At-start.UnixNano())))
	if ready.Note != "" {
		e.r.fig("flood's first refusal", "%s", ready.Note)
	}
	e.r.fig("flood renewals meanwhile", "%d: %s", done.Sent, countList(done.Got))
	e.newClientsFigures(fmt.Sprintf("new clients from %s", newSource), "lease", outcomes, lat, refusal)
	return err
}

// childFlood is the attacker child of "doorman-flood": j.Count client ids
// from j.Source each ask for a lease once ("ready"), then renew them in
// turn until told to leave.
func childFlood(ctx context.Context, j job, out *emitter, leave <-chan struct{}) error {
	var stubs []pb.CapacityClient
	for range max(1, j.Conns) {
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
	// pass asks for every id once, j.Workers at a time.
	pass := func() (int64, map[string]int64, string) {
		var next, n, worker atomic.Int64
		var mu sync.Mutex
		got, first := map[string]int64{}, ""
		workers(j.Workers, func() {
			stub := stubs[int(worker.Add(1))%len(stubs)]
			for i := next.Add(1) - 1; i < int64(j.Count) && !stopping.Load(); i = next.Add(1) - 1 {
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
		})
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

// rawCodec sends request bytes as they are and keeps response bytes
// unparsed: it lets a client send a payload no message marshals to.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append((*v.(*[]byte))[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// doormanCase is one garbage request: its payload, to method.
type doormanCase struct {
	name, method string
	payload      []byte
}

// doormanCases are attack "doorman-malformed"'s requests.
func doormanCases() []doormanCase {
	const g, capacity = "/doorman.Capacity/GetCapacity", "/doorman.Capacity/"
	// marshal cannot fail on these messages (required fields are not
	// checked, proto2 strings need not be UTF-8).
	marshal := func(m proto.Message) []byte {
		b, _ := proto.MarshalOptions{AllowPartial: true}.Marshal(m)
		return b
	}
	tag := protowire.AppendTag
	client := func(b []byte) []byte { // a valid client_id first
		return append(protowire.AppendString(tag(nil, 1, protowire.BytesType), "garbage"), b...)
	}
	resource := func(f func(r *pb.ResourceRequest)) []byte { // one resource, altered by f
		req := capacityRequest("garbage", nil)
		f(req.Resource[0])
		return marshal(req)
	}
	nested, empties := client(nil), client(nil)
	for range 10_000 {
		nested = tag(nested, 5, protowire.StartGroupType)
	}
	for range 10_000 {
		nested = tag(nested, 5, protowire.EndGroupType)
	}
	for range 100_000 {
		empties = protowire.AppendBytes(tag(empties, 2, protowire.BytesType), nil)
	}
	return []doormanCase{
		{"empty (required client_id missing)", g, nil},
		{"one byte 0xFF", g, []byte{0xFF}},
		{"16 random bytes", g, randomBytes(16, 11)},
		{"1 KB random", g, randomBytes(1<<10, 12)},
		{"64 KB random", g, randomBytes(64<<10, 13)},
		{"a key cut short", g, []byte{0x80}},
		{"client_id longer than the message", g, append(protowire.AppendVarint(tag(nil, 1, protowire.BytesType), 127), 'a')},
		{"client_id of length 2^32", g, protowire.AppendVarint(tag(nil, 1, protowire.BytesType), 1<<32)},
		{"client_id as a varint", g, protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 1)},
		{"field number 0", g, []byte{0x00, 0x01}},
		{"field number 2^29-1", g, client(protowire.AppendVarint(tag(nil, protowire.MaxValidNumber, protowire.VarintType), 1))},
		{"group start without its end", g, client(tag(nil, 5, protowire.StartGroupType))},
		{"group end without its start", g, client(tag(nil, 5, protowire.EndGroupType))},
		{"wire type 6", g, client([]byte{5<<3 | 6})},
		{"10,000 nested groups", g, nested},
		{"an 11-byte varint", g, client(append(tag(nil, 9, protowire.VarintType), bytes.Repeat([]byte{0xFF}, 11)...))},
		{"client_id not UTF-8", g, marshal(capacityRequest("\xff\xfe\xfd", nil))},
		{"client_id of 1 MB", g, marshal(capacityRequest(strings.Repeat("c", 1<<20), nil))},
		{"100,000 empty resources", g, empties},
		{"wants NaN", g, resource(func(r *pb.ResourceRequest) { r.Wants = proto.Float64(math.NaN()) })},
		{"wants -Inf", g, resource(func(r *pb.ResourceRequest) { r.Wants = proto.Float64(math.Inf(-1)) })},
		{"wants 1e308", g, resource(func(r *pb.ResourceRequest) { r.Wants = proto.Float64(1e308) })},
		{"priority -2^63", g, resource(func(r *pb.ResourceRequest) { r.Priority = proto.Int64(math.MinInt64) })},
		{"has a lease of capacity Inf, expiry -1", g, resource(func(r *pb.ResourceRequest) {
			r.Has = &pb.Lease{ExpiryTime: proto.Int64(-1), RefreshInterval: proto.Int64(0), Capacity: proto.Float64(math.Inf(1))}
		})},
		{"resource id of 64 KB", g, resource(func(r *pb.ResourceRequest) { r.ResourceId = proto.String(strings.Repeat("r", 64<<10)) })},
		{"client_id twice", g, protowire.AppendString(tag(client(nil), 1, protowire.BytesType), "other")},
		{"GetServerCapacity: 1 KB random", capacity + "GetServerCapacity", randomBytes(1<<10, 14)},
		{"GetServerCapacity: a band of -1 clients wanting NaN", capacity + "GetServerCapacity", marshal(&pb.GetServerCapacityRequest{
			ServerId: proto.String("garbage"), Resource: []*pb.ServerCapacityResourceRequest{{ResourceId: proto.String(doormanResource),
				Wants: []*pb.PriorityBandAggregate{{Priority: proto.Int64(0), NumClients: proto.Int64(-1), Wants: proto.Float64(math.NaN())}}}}})},
		{"ReleaseCapacity: 1 KB random", capacity + "ReleaseCapacity", randomBytes(1<<10, 15)},
		{"Discovery: 1 KB random", capacity + "Discovery", randomBytes(1<<10, 16)},
		{"an unknown method", capacity + "Nope", randomBytes(64, 17)},
		{"a 5 MB request", g, client(protowire.AppendBytes(tag(nil, 9, protowire.BytesType), make([]byte, 5<<20)))},
	}
}

// runDoormanMalformed sends each garbage request, checks the server is
// alive, and has a valid request answered after each.
func runDoormanMalformed(e *env) error {
	var cc *grpc.ClientConn
	defer func() {
		if cc != nil {
			cc.Close()
		}
	}()
	for _, dc := range doormanCases() {
		if e.ctx.Err() != nil {
			break
		}
		c := Case{Name: dc.name}
		if !e.t.Alive() {
			c.Note = "not sent: the server is down"
			e.r.Cases = append(e.r.Cases, c)
			continue
		}
		if cc == nil {
			var err error
			if cc, err = dialDoorman(e.t.Addr, ""); err != nil {
				return err
			}
		}
		var resp []byte
		ctx, cancel := context.WithTimeout(e.ctx, doormanCallLimit)
		t0 := time.Now()
		err := cc.Invoke(ctx, dc.method, &dc.payload, &resp, grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(16<<20))
		c.After = millis.Duration(time.Since(t0))
		cancel()
		if err != nil {
			st := status.Convert(err)
			msg := strings.ReplaceAll(st.Message(), "\u00a0", " ")
			if len(msg) > 70 {
				msg = msg[:70] + "..."
			}
			c.Answer = fmt.Sprintf("%s %q", st.Code(), msg)
		} else {
			c.Answer = fmt.Sprintf("OK (%d bytes)", len(resp))
		}
		e.survived(&c, 100*time.Millisecond)
		if !c.Survived {
			cc.Close()
			cc = nil
		} else {
			t0 := time.Now()
			_, o, err := askCapacity(e.ctx, pb.NewCapacityClient(cc), "valid-after", nil)
			next := Call{OK: o == "lease", Latency: millis.Duration(time.Since(t0))}
			if !next.OK {
				next.Code = o
			}
			if err != nil {
				next.Err = err.Error()
			}
			c.Next = &next
		}
		e.r.Cases = append(e.r.Cases, c)
	}
	survived, _, served := e.r.caseCounts()
	e.r.fig("cases", "%d: server survived %d, answered a valid request after %d", len(e.r.Cases), survived, served)
	e.r.caseFigures()
	return e.end(nil, 0)
}
