package hostile

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// The resources of the Doorman attacks on shared state (see
// doormanConfig): poisonResource is PROPORTIONAL_SHARE with short leases,
// so that the attackers' leases end within the attack; kvResource is a
// configured resource, named exactly by a template.
const (
	poisonResource = "poison"
	poisonCapacity = 1000
	// poisonLease is poisonResource's lease length, and poisonRefresh its
	// refresh interval.
	poisonLease   = 4 * time.Second
	poisonRefresh = time.Second
	// poisonWants is what each attacker wants: finite, so valid, and
	// twice of it overflows a float64.
	poisonWants = 1e308
	kvResource  = "kv-rps"
	// floodPerRequest is the resource ids in one of the resource flood's
	// requests (the server's default most per request).
	floodPerRequest = 1000
)

// askFor sends one GetCapacity from client for ids, each wanting wants,
// and returns the capacity granted for each id (NaN for an id the answer
// leaves out).
func askFor(ctx context.Context, stub pb.CapacityClient, client string, wants float64, ids ...string) ([]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, doormanCallLimit)
	defer cancel()
	req := &pb.GetCapacityRequest{ClientId: proto.String(client)}
	for _, id := range ids {
		req.Resource = append(req.Resource, &pb.ResourceRequest{ResourceId: proto.String(id), Priority: proto.Int64(0), Wants: proto.Float64(wants)})
	}
	resp, err := stub.GetCapacity(ctx, req)
	if err != nil {
		return nil, err
	}
	got := make(map[string]float64, len(ids))
	for _, r := range resp.GetResponse() {
		got[r.GetResourceId()] = r.GetGets().GetCapacity()
	}
	out := make([]float64, len(ids))
	for i, id := range ids {
		c, ok := got[id]
		if !ok {
			c = math.NaN()
		}
		out[i] = c
	}
	return out, nil
}

// legitTally counts a legitimate client's grants.
type legitTally struct {
	calls, ok int
	bad       []string // the grants that were not, at most a few
	lat       []time.Duration
	err       string
}

// ask asks for poisonResource as client. The grant must be in (0,
// poisonCapacity], or [0, poisonCapacity] for a new client's first answer,
// which gets only what the others' leases leave.
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
// poisonResource, renewing every refresh interval for e.p.hold, beside
// two legitimate clients from newSource (one holding a lease from before,
// one new), and then a new legitimate client once the attackers' leases
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
	// The attackers go quiet; the legitimate clients renew until the
	// attackers' leases have ended, and a new one comes.
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
	if attackErr != "" {
		e.r.fig("an attacker's refusal", "%s", attackErr)
	}
	e.r.fig(fmt.Sprintf("legitimate grants during the attack, from %s", newSource), "%s", during.load())
	e.r.fig("legitimate grants after the attackers' leases", "%s", after.load())
	probe := during.load()
	a := after.load()
	probe.Calls += a.Calls
	probe.OK += a.OK
	if probe.FirstError == "" {
		probe.FirstError = a.FirstError
	}
	e.r.Probe = probe
	return err
}

// runDoormanResources has a client from floodSource ask for
// e.p.floodResources new resource ids, floodPerRequest a request; then
// e.p.floodNew clients from newSource each ask for the configured
// kvResource and a resource of their own in one request.
func runDoormanResources(e *env) error {
	p := e.p
	flood, err := e.doormanStub(floodSource)
	if err != nil {
		return err
	}
	start := time.Now()
	accepted, refused := 0, 0
	firstRefusal := ""
	for i := 0; i < p.floodResources && e.ctx.Err() == nil; i += floodPerRequest {
		ids := make([]string, 0, floodPerRequest)
		for k := i; k < i+floodPerRequest && k < p.floodResources; k++ {
			ids = append(ids, "flood-"+strconv.Itoa(k))
		}
		if _, err := askFor(e.ctx, flood, "flood-"+strconv.Itoa(i/floodPerRequest), 1, ids...); err != nil {
			refused++
			if firstRefusal == "" {
				firstRefusal = status.Convert(err).Message()
			}
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
	// The flood asks for more once the newcomers are in: it is at or
	// over its share.
	_, err = askFor(e.ctx, flood, "flood-more", 1, "flood-more")
	floodAfter := "granted"
	if err != nil {
		floodAfter = status.Code(err).String()
	}
	err = e.end(nil, p.settle)
	e.r.fig(fmt.Sprintf("flood: resource ids from %s", floodSource), "%d accepted in %s, %d requests of %d refused",
		accepted, sec(took), refused, floodPerRequest)
	if firstRefusal != "" {
		e.r.fig("flood's first refusal", "%s", firstRefusal)
	}
	e.newClientsFigures(fmt.Sprintf("new clients from %s asking %q and one of their own", newSource, kvResource), "both granted", outcomes, lat, refusal)
	e.r.fig("the flood's next new resource", "%s", floodAfter)
	return err
}

// doormanStub returns a client of the Doorman server from source, closed
// with the attack's cleanups.
func (e *env) doormanStub(source string) (pb.CapacityClient, error) {
	cc, err := dialDoorman(e.t.Addr, source)
	if err != nil {
		return nil, err
	}
	e.cleanups = append(e.cleanups, func() { cc.Close() })
	return pb.NewCapacityClient(cc), nil
}
