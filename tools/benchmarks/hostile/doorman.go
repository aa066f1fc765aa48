package hostile

import (
	"bytes"
	"cmp"
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

// The Doorman attacks' resources (see doormanConfig) and sources; the
// target is always 127.0.0.1.
const (
	doormanResource = "hostile" // what the flood and the malformed requests ask for
	floodSource     = "127.0.0.2"
	newSource       = "127.0.0.3" // the newcomers'
	// poisonResource is PROPORTIONAL_SHARE with leases that end within the
	// attack.
	poisonResource   = "poison"
	poisonCapacity   = 1000
	poisonLease      = 4 * time.Second
	poisonRefresh    = time.Second
	poisonWants      = 1e308    // finite, so valid; twice it overflows a float64
	kvResource       = "kv-rps" // named exactly by a template
	floodPerRequest  = 1000     // the server's default most resource ids a request
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

// capacityRequest asks, as client, for wants of each resource id.
func capacityRequest(client string, wants float64, ids ...string) *pb.GetCapacityRequest {
	req := &pb.GetCapacityRequest{ClientId: proto.String(client)}
	for _, id := range ids {
		req.Resource = append(req.Resource, &pb.ResourceRequest{ResourceId: proto.String(id), Priority: proto.Int64(0), Wants: proto.Float64(wants)})
	}
	return req
}

// getCapacity sends req and returns the leases granted, by resource id.
func getCapacity(ctx context.Context, stub pb.CapacityClient, req *pb.GetCapacityRequest) (map[string]*pb.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, doormanCallLimit)
	defer cancel()
	resp, err := stub.GetCapacity(ctx, req)
	if err != nil {
		return nil, err
	}
	got := map[string]*pb.Lease{}
	for _, r := range resp.GetResponse() {
		got[r.GetResourceId()] = r.GetGets()
	}
	return got, nil
}

// askCapacity asks for doormanResource, holding has, and returns the
// lease and the outcome it is counted under: "lease", "no lease" or the
// failure's gRPC code.
func askCapacity(ctx context.Context, stub pb.CapacityClient, client string, has *pb.Lease) (*pb.Lease, string, error) {
	req := capacityRequest(client, 1, doormanResource)
	req.Resource[0].Has = has
	got, err := getCapacity(ctx, stub, req)
	if err != nil {
		return nil, status.Code(err).String(), err
	}
	if l, ok := got[doormanResource]; ok {
		return l, "lease", nil
	}
	return nil, "no lease", nil
}

// askFor asks, as client, for wants of each of ids, and returns the
// capacity granted for each (NaN where the answer has none).
func askFor(ctx context.Context, stub pb.CapacityClient, client string, wants float64, ids ...string) ([]float64, error) {
	got, err := getCapacity(ctx, stub, capacityRequest(client, wants, ids...))
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(ids))
	for i, id := range ids {
		out[i] = math.NaN()
		if l, ok := got[id]; ok {
			out[i] = l.GetCapacity()
		}
	}
	return out, nil
}

// newClients has e.p.floodNew new clients from newSource ask once each,
// and returns ask's outcomes, the latencies and the first refusal.
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

// newClientsFigures appends the new clients' figure and records them as
// the probe, those whose outcome is ok served.
func (e *env) newClientsFigures(name, ok string, outcomes map[string]int, lat []time.Duration, refusal string) {
	e.r.fig(name, "%s of %d; p50 %s p99 %s", countList(outcomes), e.p.floodNew, ms(quantile(lat, 0.5)), ms(quantile(lat, 0.99)))
	e.r.note("a new client's first refusal", refusal)
	e.r.Probe = latencyLoad(e.p.floodNew, outcomes[ok], lat, refusal)
}

// latencyLoad is a Load of calls, ok of them served, of latencies lat.
func latencyLoad(calls, ok int, lat []time.Duration, firstErr string) *Load {
	return &Load{Calls: calls, OK: ok, P50: millis.Duration(quantile(lat, 0.5)), P99: millis.Duration(quantile(lat, 0.99)),
		Max: millis.Duration(quantile(lat, 1)), FirstError: firstErr}
}

// runDoormanSilent holds silent connections to a Doorman server, then
// runs `sluice doorman get`.
func runDoormanSilent(e *env) error {
	p := e.p
	start := time.Now()
	attackers, err := e.holdConns("stall", e.t.Addr, false)
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

// runDoormanFlood has an attacker child register e.p.floodIDs client ids
// and renew their leases, while new clients from newSource ask.
func runDoormanFlood(e *env) error {
	p := e.p
	start := time.Now()
	a, ready, err := e.attacker(job{Kind: "flood", Target: e.t.Addr, Source: floodSource, Count: p.floodIDs, Workers: 32, Conns: 4}, "ready", readyLimit)
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
	e.r.note("flood's first refusal", ready.Note)
	e.r.fig("flood renewals meanwhile", "%d: %s", done.Sent, countList(done.Got))
	e.newClientsFigures(fmt.Sprintf("new clients from %s", newSource), "lease", outcomes, lat, refusal)
	return err
}

// childFlood is the attacker child of "doorman-flood": j.Count client ids
// from j.Source ask for a lease once ("ready"), then renew until told to
// leave.
func childFlood(ctx context.Context, j job, out *emitter, leave context.Context) error {
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
	// pass asks for every id once, j.Workers at a time, counting in ev.
	pass := func(ev *event) {
		var next, worker atomic.Int64
		var mu sync.Mutex
		workers(j.Workers, func() {
			stub := stubs[int(worker.Add(1))%len(stubs)]
			for i := next.Add(1) - 1; i < int64(j.Count) && !stopping.Load(); i = next.Add(1) - 1 {
				lease, o, err := askCapacity(ctx, stub, "flood-"+strconv.FormatInt(i, 10), has[i])
				if stopping.Load() {
					return // cut short by leaving: not counted
				}
				has[i] = lease
				mu.Lock()
				ev.Sent++
				ev.Got[o]++
				if err != nil && ev.Note == "" {
					ev.Note = o + ": " + status.Convert(err).Message()
				}
				mu.Unlock()
			}
		})
	}
	ready := event{Ev: "ready", Got: map[string]int64{}}
	pass(&ready)
	out.emit(ready)
	go func() {
		<-leave.Done()
		stopping.Store(true)
		cancel()
	}()
	done := event{Ev: "done", Got: map[string]int64{}}
	for !stopping.Load() {
		pass(&done)
	}
	out.emit(done)
	return nil
}

// rawCodec sends and receives bytes as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append((*v.(*[]byte))[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// doormanCase is one garbage request to method.
type doormanCase struct {
	name, method string
	payload      []byte
}

// doormanCases are attack "doorman-malformed"'s requests.
func doormanCases() []doormanCase {
	const g, capacity = "/doorman.Capacity/GetCapacity", "/doorman.Capacity/"
	// marshal cannot fail: required fields are not checked, nor UTF-8.
	marshal := func(m proto.Message) []byte {
		b, _ := proto.MarshalOptions{AllowPartial: true}.Marshal(m)
		return b
	}
	tag := protowire.AppendTag
	client := func(b []byte) []byte { // a valid client_id first
		return append(protowire.AppendString(tag(nil, 1, protowire.BytesType), "garbage"), b...)
	}
	resource := func(f func(r *pb.ResourceRequest)) []byte { // one resource, altered by f
		req := capacityRequest("garbage", 1, doormanResource)
		f(req.Resource[0])
		return marshal(req)
	}
	groups := func(t protowire.Type) []byte { return bytes.Repeat(tag(nil, 5, t), 10_000) }
	nested := client(append(groups(protowire.StartGroupType), groups(protowire.EndGroupType)...))
	empties := client(bytes.Repeat(protowire.AppendBytes(tag(nil, 2, protowire.BytesType), nil), 100_000))
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
		{"client_id not UTF-8", g, marshal(capacityRequest("\xff\xfe\xfd", 1, doormanResource))},
		{"client_id of 1 MB", g, marshal(capacityRequest(strings.Repeat("c", 1<<20), 1, doormanResource))},
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

// runDoormanMalformed sends each garbage request, then a valid one.
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
		if !e.t.Alive() {
			e.r.Cases = append(e.r.Cases, Case{Name: dc.name, Note: "not sent: the server is down"})
			continue
		}
		if cc == nil {
			var err error
			if cc, err = dialDoorman(e.t.Addr, ""); err != nil {
				return err
			}
		}
		c := e.sendDoormanCase(cc, dc)
		e.r.Cases = append(e.r.Cases, c)
		if !c.Survived {
			cc.Close()
			cc = nil
		}
	}
	survived, _, served := e.r.caseCounts()
	e.r.fig("cases", "%d: server survived %d, answered a valid request after %d", len(e.r.Cases), survived, served)
	e.r.caseFigures()
	return e.end(nil, 0)
}

// sendDoormanCase sends dc on cc and, if the server survived, a valid request.
func (e *env) sendDoormanCase(cc *grpc.ClientConn, dc doormanCase) Case {
	c := Case{Name: dc.name}
	var resp []byte
	ctx, cancel := context.WithTimeout(e.ctx, doormanCallLimit)
	defer cancel()
	t0 := time.Now()
	err := cc.Invoke(ctx, dc.method, &dc.payload, &resp, grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(16<<20))
	c.After = millis.Duration(time.Since(t0))
	c.Answer = fmt.Sprintf("OK (%d bytes)", len(resp))
	if err != nil {
		st := status.Convert(err)
		msg := strings.ReplaceAll(st.Message(), "\u00a0", " ")
		if len(msg) > 70 {
			msg = msg[:70] + "..."
		}
		c.Answer = fmt.Sprintf("%s %q", st.Code(), msg)
	}
	if e.survived(&c, 100*time.Millisecond); !c.Survived {
		return c
	}
	t0 = time.Now()
	_, o, err := askCapacity(e.ctx, pb.NewCapacityClient(cc), "valid-after", nil)
	c.Next = &Call{OK: o == "lease", Latency: millis.Duration(time.Since(t0))}
	if !c.Next.OK {
		c.Next.Code = o
	}
	if err != nil {
		c.Next.Err = err.Error()
	}
	return c
}

// legitTally counts a legitimate client's grants.
type legitTally struct {
	calls, ok int
	bad       []string // the grants that were not, at most a few
	lat       []time.Duration
	err       string
}

// ask asks for poisonResource as client. The grant must be in (0,
// poisonCapacity], or [0, poisonCapacity] for a new client's first.
func (l *legitTally) ask(ctx context.Context, stub pb.CapacityClient, client string, first bool) {
	t0 := time.Now()
	got, err := askFor(ctx, stub, client, 100, poisonResource)
	l.calls++
	if err != nil {
		l.err = cmp.Or(l.err, status.Convert(err).Message())
		return
	}
	l.lat = append(l.lat, time.Since(t0))
	if c := got[0]; c <= poisonCapacity && (c > 0 || first && c == 0) {
		l.ok++
	} else if len(l.bad) < 5 {
		l.bad = append(l.bad, fmt.Sprintf("%s %v", client, c))
	}
}

func (l *legitTally) load() *Load {
	ld := latencyLoad(l.calls, l.ok, l.lat, l.err)
	if len(l.bad) > 0 && ld.FirstError == "" {
		ld.FirstError = fmt.Sprintf("grants out of (0, %d]: %v", poisonCapacity, l.bad)
	}
	return ld
}

// runDoormanPoison has two clients from floodSource want poisonWants of
// poisonResource for e.p.hold, beside two legitimate clients from
// newSource (one old, one new), and a new one once the attackers' leases
// have expired.
func runDoormanPoison(e *env) error {
	p := e.p
	attack, err := e.doormanStub(floodSource)
	if err != nil {
		return err
	}
	legit, err := e.doormanStub(newSource)
	if err != nil {
		return err
	}

	var during, after legitTally
	during.ask(e.ctx, legit, "legit-old", true) // before the attack: its first
	attackers := []float64{math.NaN(), math.NaN()}
	attackErr := ""
	start := time.Now()
	for round := 0; time.Since(start) < p.hold && e.ctx.Err() == nil; round++ {
		for i := range attackers {
			got, err := askFor(e.ctx, attack, "poison-"+strconv.Itoa(i), poisonWants, poisonResource)
			if err != nil {
				attackErr = status.Convert(err).Message()
				continue
			}
			attackers[i] = got[0]
		}
		during.ask(e.ctx, legit, "legit-old", false)
		during.ask(e.ctx, legit, "legit-new", round == 0)
		if err := e.pause(poisonRefresh); err != nil {
			break
		}
	}
	// The attackers go quiet until their leases end.
	for end := time.Now().Add(poisonLease + poisonRefresh); time.Now().Before(end) && e.ctx.Err() == nil; {
		after.ask(e.ctx, legit, "legit-old", false)
		after.ask(e.ctx, legit, "legit-new", false)
		if err := e.pause(poisonRefresh); err != nil {
			break
		}
	}
	after.ask(e.ctx, legit, "legit-after", true)
	after.ask(e.ctx, legit, "legit-after", false)
	err = e.end(nil, p.settle)
	e.r.fig(fmt.Sprintf("attackers from %s", floodSource), "2 clients wanting %g of %q (PROPORTIONAL_SHARE, capacity %d) for %s, last granted %v",
		poisonWants, poisonResource, poisonCapacity, sec(p.hold), attackers)
	e.r.note("an attacker's refusal", attackErr)
	probe, a := during.load(), after.load()
	e.r.fig(fmt.Sprintf("legitimate grants during the attack, from %s", newSource), "%s", probe)
	e.r.fig("legitimate grants after the attackers' leases", "%s", a)
	probe.Calls, probe.OK, probe.FirstError = probe.Calls+a.Calls, probe.OK+a.OK, cmp.Or(probe.FirstError, a.FirstError)
	e.r.Probe = probe
	return err
}

// runDoormanResources has a client from floodSource ask for
// floodResources new resource ids; then new clients from newSource
// each ask for kvResource and one of their own.
func runDoormanResources(e *env) error {
	flood, err := e.doormanStub(floodSource)
	if err != nil {
		return err
	}
	start := time.Now()
	accepted, refused := 0, 0
	firstRefusal := ""
	for i := 0; i < floodResources && e.ctx.Err() == nil; i += floodPerRequest {
		ids := make([]string, 0, floodPerRequest)
		for k := i; k < i+floodPerRequest && k < floodResources; k++ {
			ids = append(ids, "flood-"+strconv.Itoa(k))
		}
		if _, err := askFor(e.ctx, flood, "flood-"+strconv.Itoa(i/floodPerRequest), 1, ids...); err != nil {
			refused++
			firstRefusal = cmp.Or(firstRefusal, status.Convert(err).Message())
			continue
		}
		accepted += len(ids)
	}
	took := time.Since(start)
	e.logf("%d flood resource ids accepted in %.2fs, %d requests refused", accepted, took.Seconds(), refused)

	outcomes, lat, refusal, err := e.newClients(func(stub pb.CapacityClient, i string) (string, error) {
		got, err := askFor(e.ctx, stub, "new-"+i, 1, kvResource, "new-own-"+i)
		switch {
		case err != nil:
			return status.Code(err).String(), err
		case got[0] > 0 && got[1] > 0:
			return "both granted", nil
		}
		return fmt.Sprintf("granted %v", got), nil
	})
	if err != nil {
		return err
	}
	// The flood, at or over its share, asks for more.
	_, err = askFor(e.ctx, flood, "flood-more", 1, "flood-more")
	floodAfter := "granted"
	if err != nil {
		floodAfter = status.Code(err).String()
	}
	err = e.end(nil, e.p.settle)
	e.r.fig(fmt.Sprintf("flood: resource ids from %s", floodSource), "%d accepted in %s, %d requests of %d refused",
		accepted, sec(took), refused, floodPerRequest)
	e.r.note("flood's first refusal", firstRefusal)
	e.newClientsFigures(fmt.Sprintf("new clients from %s asking %q and one of their own", newSource, kvResource), "both granted", outcomes, lat, refusal)
	e.r.fig("the flood's next new resource", "%s", floodAfter)
	return err
}

func (e *env) doormanStub(source string) (pb.CapacityClient, error) {
	cc, err := dialDoorman(e.t.Addr, source)
	if err != nil {
		return nil, err
	}
	e.cleanups = append(e.cleanups, func() { cc.Close() })
	return pb.NewCapacityClient(cc), nil
}
