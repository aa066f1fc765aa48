// Package doormansim runs Doorman server trees in virtual time: the real
// leasing server and client on a fake clock, driven by one event loop,
// over an in-memory network that delivers every RPC at once, except to a
// server that is down (codes.Unavailable). It measures how much of a
// resource's capacity the clients hold while demands change, servers crash
// and masters fail over, and how far they overshoot it. The same Scenario
// and seed give the same figures to the last digit.
package doormansim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/serverhook"
	"github.com/sluice-rpc/sluice/leasing"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/leasing/server"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
	"github.com/sluice-rpc/sluice/tools/internal/sim/event"
)

// Kind is the root's algorithm, a server.Kind that JSON writes by name.
type Kind server.Kind

// String returns k's name: FAIR_SHARE.
func (k Kind) String() string { return server.Kind(k).String() }

// MarshalText writes k by name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Scenario is one simulation: a tree of Doorman nodes, its clients, how
// their demand changes and what goes wrong.
type Scenario struct {
	Name  string `json:"name"`
	About string `json:"about"`

	Capacity  float64 `json:"capacity"`
	Algorithm Kind    `json:"algorithm"`
	// Fanout is the number of intermediate nodes under each node, level
	// by level from the root ([3, 3]: three regions of three datacentres);
	// empty means the clients talk to the root.
	Fanout []int `json:"fanout"`
	// Clients is the number of clients under each leaf node, each with a
	// base demand of Wants.
	Clients int     `json:"clients"`
	Wants   float64 `json:"wants"`

	// LeaseLength and RefreshInterval are the root's (whole seconds); the
	// refresh interval halves at each level of intermediates.
	LeaseLength     millis.Duration `json:"lease_length_ms"`
	RefreshInterval millis.Duration `json:"refresh_interval_ms"`
	// Learning is the root's learning mode duration; negative means the
	// lease length.
	Learning millis.Duration `json:"learning_ms"`
	// ClientMinRefresh is the clients' shortest interval between requests.
	ClientMinRefresh millis.Duration `json:"client_min_refresh_ms"`
	// A client's demand changes every ChangeMin to ChangeMax (uniform), to
	// a value drawn uniformly within Step (a fraction) of its base.
	ChangeMin millis.Duration `json:"change_min_ms"`
	ChangeMax millis.Duration `json:"change_max_ms"`
	Step      float64         `json:"step"`

	// MishapEvery is the mean time between mishaps (uniform within half of
	// it either side; 0: none). A mishap is, with equal chances, a demand
	// spike of SpikeWants for SpikeLength, an intermediate server crashing
	// and restarting empty after Downtime, or the root's master failing
	// over to its standby after FailoverGap without a master.
	MishapEvery millis.Duration `json:"mishap_every_ms"`
	SpikeWants  float64         `json:"spike_wants"`
	SpikeLength millis.Duration `json:"spike_length_ms"`
	Downtime    millis.Duration `json:"downtime_ms"`
	FailoverGap millis.Duration `json:"failover_gap_ms"`

	// Duration is the simulated time; Sample the interval between samples.
	Duration millis.Duration `json:"duration_ms"`
	Sample   millis.Duration `json:"sample_ms"`
	Seed     uint64          `json:"seed"`
}

// Validate reports the first thing wrong with sc.
func (sc *Scenario) Validate() error {
	switch {
	case !(sc.Capacity > 0) || math.IsInf(sc.Capacity, 0):
		return fmt.Errorf("doormansim: capacity is %v, must be a finite number > 0", sc.Capacity)
	case sc.Clients < 1 || sc.Clients > 100000:
		return fmt.Errorf("doormansim: clients per leaf is %d, must be 1 to 100000", sc.Clients)
	case !(sc.Wants >= 0) || math.IsInf(sc.Wants, 0):
		return fmt.Errorf("doormansim: wants is %v, must be a finite number >= 0", sc.Wants)
	case sc.LeaseLength.D() < time.Second || sc.LeaseLength.D()%time.Second != 0:
		return fmt.Errorf("doormansim: lease length is %v, must be whole seconds >= 1s", sc.LeaseLength)
	case sc.RefreshInterval.D() < time.Second || sc.RefreshInterval.D()%time.Second != 0 || sc.RefreshInterval > sc.LeaseLength:
		return fmt.Errorf("doormansim: refresh interval is %v, must be whole seconds, >= 1s and <= the lease length", sc.RefreshInterval)
	case sc.Learning >= 0 && sc.Learning.D()%time.Second != 0:
		return fmt.Errorf("doormansim: learning mode duration is %v, must be whole seconds", sc.Learning)
	case sc.ClientMinRefresh < 0:
		return fmt.Errorf("doormansim: client minimum refresh interval is %v, must be >= 0", sc.ClientMinRefresh)
	case sc.ChangeMin <= 0 || sc.ChangeMax < sc.ChangeMin:
		return fmt.Errorf("doormansim: demand changes every %v to %v, want 0 < min <= max", sc.ChangeMin, sc.ChangeMax)
	case !(sc.Step >= 0 && sc.Step < 1):
		return fmt.Errorf("doormansim: demand step is %v, must be in [0, 1)", sc.Step)
	case sc.MishapEvery < 0:
		return fmt.Errorf("doormansim: mishap interval is %v, must be >= 0 (0: none)", sc.MishapEvery)
	case sc.MishapEvery > 0 && (sc.SpikeLength <= 0 || sc.Downtime <= 0 || sc.FailoverGap < 0 || !(sc.SpikeWants >= 0)):
		return errors.New("doormansim: with mishaps, spike length and downtime must be > 0, failover gap and spike wants >= 0")
	case sc.Duration.D() < time.Second || sc.Duration.D() > 24*time.Hour:
		return fmt.Errorf("doormansim: duration is %v, must be 1s to 24h", sc.Duration)
	case sc.Sample.D() < time.Second || sc.Sample.D()%time.Second != 0:
		return fmt.Errorf("doormansim: sampling interval is %v, must be whole seconds >= 1s", sc.Sample)
	}
	leaves := 1
	for i, f := range sc.Fanout {
		if f < 1 || f > 10000 {
			return fmt.Errorf("doormansim: fanout %d (level %d) must be 1 to 10000", f, i+1)
		}
		leaves *= f
		if leaves > 100000 {
			return errors.New("doormansim: the tree has more than 100000 leaf nodes")
		}
	}
	if leaves*sc.Clients > 100000 {
		return fmt.Errorf("doormansim: %d clients, at most 100000", leaves*sc.Clients)
	}
	return nil
}

// NumClients returns the number of clients in the tree.
func (sc *Scenario) NumClients() int {
	n := sc.Clients
	for _, f := range sc.Fanout {
		n *= f
	}
	return n
}

// LearningDuration returns the root's learning mode duration.
func (sc *Scenario) LearningDuration() time.Duration {
	if sc.Learning < 0 {
		return sc.LeaseLength.D()
	}
	return sc.Learning.D()
}

// base returns the parameters every scenario shares.
func base() Scenario {
	return Scenario{
		Algorithm:        Kind(server.FairShare),
		LeaseLength:      millis.Duration(60 * time.Second),
		RefreshInterval:  millis.Duration(5 * time.Second),
		Learning:         -1,
		ClientMinRefresh: millis.Duration(time.Second),
		ChangeMin:        millis.Duration(30 * time.Second),
		ChangeMax:        millis.Duration(90 * time.Second),
		Step:             0.3,
		SpikeWants:       100,
		SpikeLength:      millis.Duration(2 * time.Minute),
		Downtime:         millis.Duration(30 * time.Second),
		FailoverGap:      millis.Duration(3 * time.Second),
		Duration:         millis.Duration(time.Hour),
		Sample:           millis.Duration(time.Second),
		Seed:             1,
	}
}

// Scenarios returns the named scenarios, in the order they are listed.
func Scenarios() []Scenario {
	root := base()
	root.Name, root.About = "root", "the design's first scenario: one root, capacity 500, five clients wanting 100 each, then varying"
	root.Capacity, root.Clients, root.Wants = 500, 5, 100

	tree := base()
	tree.Name, tree.About = "tree", "the design's scenario five: root, 3 regions, 3 datacentres each, 5 clients each (45 wanting 14), varying, no mishaps"
	tree.Capacity, tree.Fanout, tree.Clients, tree.Wants = 500, []int{3, 3}, 5, 14

	mishaps := tree
	mishaps.Name, mishaps.About = "tree-mishaps", "the design's scenario seven: scenario five with a mishap every 5 minutes on average (demand spikes, intermediate crashes, root failovers)"
	mishaps.MishapEvery = millis.Duration(5 * time.Minute)

	large := base()
	large.Name, large.About = "large", "10,000 clients under 100 intermediates, capacity 110,000 (wants 14 each), varying, no mishaps"
	large.Capacity, large.Fanout, large.Clients, large.Wants = 110000, []int{100}, 100, 14
	large.Duration = millis.Duration(10 * time.Minute)
	return []Scenario{root, tree, mishaps, large}
}

// Lookup returns the scenario named name.
func Lookup(name string) (Scenario, bool) {
	for _, sc := range Scenarios() {
		if sc.Name == name {
			return sc, true
		}
	}
	return Scenario{}, false
}

// Sample is the state of the tree at one moment.
type Sample struct {
	T millis.Duration `json:"t_ms"`
	// Wants sums the clients' demands; Has their unexpired leases.
	Wants    float64 `json:"wants"`
	Has      float64 `json:"has"`
	Capacity float64 `json:"capacity"`
	// RootMaster is false while the root node has no master.
	RootMaster bool `json:"root_master"`
}

// Mishap is one thing that went wrong.
type Mishap struct {
	T millis.Duration `json:"t_ms"`
	// Kind is "spike", "crash" or "failover".
	Kind string `json:"kind"`
	// Target names the client or server.
	Target string `json:"target"`
}

// Summary condenses a run.
type Summary struct {
	// From is the end of the root's first learning mode.
	From millis.Duration `json:"from_ms"`
	// Used is the mean, over the samples from From, of what the clients
	// hold divided by min(their total demand, capacity).
	Used float64 `json:"used"`
	// Over counts the samples holding more than the capacity, Episodes
	// the runs of them; Max is the most held, MeanOver the mean while over.
	Over     int     `json:"over"`
	Episodes int     `json:"episodes"`
	Max      float64 `json:"max"`
	MeanOver float64 `json:"mean_over"`
	// Reconverge is the longest time from a change (a demand or a mishap)
	// after From to the next converged sample (isConverged);
	// ReconvergeAfter says which change.
	Reconverge      millis.Duration `json:"reconverge_ms"`
	ReconvergeAfter string          `json:"reconverge_after"`
	// MishapReconverge is the longest time from a mishap to the end of
	// the first unconverged stretch starting within a lease length and a
	// downtime after it (a crashed server's leases outlive it a while).
	MishapReconverge      millis.Duration `json:"mishap_reconverge_ms"`
	MishapReconvergeAfter string          `json:"mishap_reconverge_after"`
	RPCs                  int64           `json:"rpcs"`
}

// Result is a run.
type Result struct {
	Scenario Scenario
	Summary  Summary
	Mishaps  []Mishap
	Samples  []Sample
}

// ConvergedWithin is the fraction of min(demand, capacity) the clients
// must hold for a sample to count as converged.
const ConvergedWithin = 0.99

// resource is the one resource every client leases.
const resource = "resource"

// Run runs sc.
func Run(sc Scenario) (Result, error) {
	if err := sc.Validate(); err != nil {
		return Result{}, err
	}
	s := newSim(sc)
	defer s.stop()
	if err := s.build(); err != nil {
		return Result{}, err
	}
	s.loop()
	return s.result(), nil
}

// epoch is the simulated start, a whole second as lease expiries are.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type sim struct {
	sc   Scenario
	clk  *clock.Fake
	rng  *rand.Rand
	repo *server.Repository

	events *event.Loop

	nodes   []*node // root first, then by level
	up      map[string]*srv
	clients []*client

	changes []change // demand changes and mishaps, for re-convergence
	mishaps []Mishap
	samples []Sample
	rpcs    int64
}

type change struct {
	at   time.Duration
	what string
}

// node is one Doorman node: one server, or for the root a master and a
// standby.
type node struct {
	name    string
	parent  *node
	servers []*srv
	master  int // index of the root's master; -1 while it has none
}

// srv is one server process.
type srv struct {
	addr     string
	n        *node
	s        *server.Server
	rpcs     pb.CapacityServer // s's RPCs, called in-process
	parent   serverhook.Parent // an intermediate's link to its parent
	election *election
	tick     time.Time // the pending tick of the parent link (schedule)
}

// client is one leasing client.
type client struct {
	name  string
	c     *leasing.Client
	r     *leasing.Resource
	base  float64
	spike float64
	tick  time.Time // the pending tick (schedule)
}

func newSim(sc Scenario) *sim {
	s := &sim{
		sc:  sc,
		clk: clock.NewFake(epoch),
		rng: rand.New(rand.NewPCG(sc.Seed, 0x5eed)),
		up:  make(map[string]*srv),
	}
	s.events = event.NewLoop(s.clk)
	learning := int64(sc.LearningDuration() / time.Second)
	s.repo = &server.Repository{Resources: []server.Template{{
		IdentifierGlob: "*",
		Capacity:       sc.Capacity,
		Algorithm: server.Algorithm{Kind: server.Kind(sc.Algorithm), LeaseLength: int64(sc.LeaseLength.D() / time.Second),
			RefreshInterval: int64(sc.RefreshInterval.D() / time.Second), LearningModeDuration: &learning},
	}}}
	return s
}

func (s *sim) now() time.Duration { return s.clk.Now().Sub(epoch) }

// build starts the servers and clients at time 0.
func (s *sim) build() error {
	root := &node{name: "root", master: 0}
	s.nodes = append(s.nodes, root)
	for _, addr := range []string{"root-a", "root-b"} {
		sv := &srv{addr: addr, n: root, election: &election{ready: make(chan struct{})}}
		root.servers = append(root.servers, sv)
		if err := s.start(sv); err != nil {
			return err
		}
	}
	s.elect(0)
	level := []*node{root}
	for _, f := range s.sc.Fanout {
		var next []*node
		for _, p := range level {
			for i := range f {
				n := &node{name: fmt.Sprintf("%s/%d", p.name, i+1), parent: p}
				if p == root {
					n.name = fmt.Sprintf("n%d", i+1)
				}
				sv := &srv{addr: n.name, n: n}
				n.servers = []*srv{sv}
				if err := s.start(sv); err != nil {
					return err
				}
				s.nodes = append(s.nodes, n)
				next = append(next, n)
			}
		}
		level = next
	}
	for _, leaf := range level {
		for i := range s.sc.Clients {
			if err := s.addClient(leaf, i); err != nil {
				return err
			}
		}
	}
	if s.sc.MishapEvery > 0 {
		s.at(s.mishapGap(), s.mishap)
	}
	return nil
}

// mishapGap returns when the next mishap comes: uniformly within half the
// mean either side, so runs have about as many (unlike exponential gaps).
func (s *sim) mishapGap() time.Duration {
	d := time.Duration((0.5 + s.rng.Float64()) * float64(s.sc.MishapEvery))
	return s.now() + max(d, time.Second).Round(time.Second)
}

// start starts (or restarts) a server process, empty.
func (s *sim) start(sv *srv) error {
	// A random stream per server process, fixed by seed, name and start.
	h := fnv.New64a()
	h.Write([]byte(sv.addr))
	stream := h.Sum64() ^ uint64(s.clk.Now().UnixNano())
	cfg := server.Config{Clock: s.clk, Address: sv.addr, Rand: rand.New(rand.NewPCG(s.sc.Seed^0x6a09e667f3bcc908, stream)).Float64}
	if sv.n.parent == nil {
		cfg.Repository = s.repo
		cfg.Election = sv.election
	} else {
		cfg.Parent = sv.n.parent.servers[0].addr
		cfg.ID = sv.n.name
	}
	srvr, err := server.New(cfg)
	if err != nil {
		return err
	}
	if sv.n.parent != nil { // the event loop ticks the parent link
		if sv.parent, err = serverhook.DriveParent(srvr, s.dial); err != nil {
			return err
		}
	}
	rpcs, err := serverhook.Capacity(srvr)
	if err != nil {
		return err
	}
	if err := srvr.Start(); err != nil {
		return err
	}
	sv.s, sv.rpcs = srvr, rpcs
	s.up[sv.addr] = sv
	if sv.election != nil {
		<-sv.election.ready // Run is waiting for the outcomes we report
	}
	if sv.n.parent != nil {
		s.schedule(&sv.tick, s.clk.Now(), func() { s.tickServer(sv) })
	}
	return nil
}

// crash stops a server process and loses its state.
func (s *sim) crash(sv *srv) {
	delete(s.up, sv.addr)
	sv.s.Stop()
	sv.s, sv.rpcs = nil, nil
	sv.tick = time.Time{}
}

// elect makes the root's server i its master; -1 leaves it none.
func (s *sim) elect(i int) {
	root := s.nodes[0]
	root.master = i
	var m server.Mastership
	if i >= 0 {
		m.Master = root.servers[i].addr
	}
	for j, sv := range root.servers {
		m.IsMaster = j == i
		sv.election.tell(m)
	}
}

func (s *sim) addClient(leaf *node, i int) error {
	name := fmt.Sprintf("%s/c%d", leaf.name, i+1)
	cl, err := leasing.NewClient(leasing.ClientConfig{
		Addr: leaf.servers[0].addr, ID: name, Clock: s.clk, Dial: s.dial, ManualRefresh: true,
		MinRefreshInterval: s.sc.ClientMinRefresh.D(),
		Rand:               rand.New(rand.NewPCG(s.sc.Seed^0x9e3779b97f4a7c15, uint64(len(s.clients)))).Float64,
	})
	if err != nil {
		return err
	}
	r, err := cl.Resource(resource, leasing.ResourceConfig{Wants: s.sc.Wants, Mode: leasing.Pessimistic})
	if err != nil {
		return err
	}
	c := &client{name: name, c: cl, r: r, base: s.sc.Wants}
	s.clients = append(s.clients, c)
	s.schedule(&c.tick, s.clk.Now(), func() { s.tickClient(c) })
	s.at(s.now()+s.changeGap(), func() { s.changeWants(c) })
	return nil
}

func (s *sim) changeGap() time.Duration {
	lo, hi := s.sc.ChangeMin, s.sc.ChangeMax
	return (lo.D() + time.Duration(s.rng.Float64()*float64(hi-lo))).Round(time.Millisecond)
}

func (s *sim) changeWants(c *client) {
	w := c.base * (1 + s.sc.Step*(2*s.rng.Float64()-1))
	s.setWants(c, w+c.spike, "a demand change")
	s.at(s.now()+s.changeGap(), func() { s.changeWants(c) })
}

func (s *sim) setWants(c *client, w float64, what string) {
	if w == c.r.Wants() {
		return
	}
	if err := c.r.SetWants(w); err != nil {
		panic(err) // w is finite and >= 0 by construction
	}
	s.changes = append(s.changes, change{s.now(), what + " (" + c.name + ")"})
	s.schedule(&c.tick, s.clk.Now(), func() { s.tickClient(c) })
}

func (s *sim) tickClient(c *client) {
	next, _ := c.c.Tick(context.Background())
	s.schedule(&c.tick, next, func() { s.tickClient(c) })
}

func (s *sim) tickServer(sv *srv) {
	if sv.s == nil {
		return
	}
	next := sv.parent.Tick(context.Background())
	s.schedule(&sv.tick, next, func() { s.tickServer(sv) })
}

// mishap makes one thing go wrong and schedules the next.
func (s *sim) mishap() {
	kinds := []string{"spike", "crash", "failover"}
	if len(s.nodes) == 1 {
		kinds = []string{"spike", "failover"}
	}
	switch kind := kinds[s.rng.IntN(len(kinds))]; kind {
	case "spike":
		c := s.clients[s.rng.IntN(len(s.clients))]
		if c.spike == 0 {
			c.spike = s.sc.SpikeWants
			s.mishaps = append(s.mishaps, Mishap{millis.Duration(s.now()), kind, c.name})
			s.setWants(c, c.r.Wants()+c.spike, "a spike")
			s.at(s.now()+s.sc.SpikeLength.D(), func() {
				c.spike = 0
				s.setWants(c, math.Max(c.r.Wants()-s.sc.SpikeWants, 0), "a spike's end")
			})
		}
	case "crash":
		n := s.nodes[1+s.rng.IntN(len(s.nodes)-1)]
		sv := n.servers[0]
		if sv.s != nil {
			s.mishaps = append(s.mishaps, Mishap{millis.Duration(s.now()), kind, sv.addr})
			s.changes = append(s.changes, change{s.now(), "a crash of " + sv.addr})
			s.crash(sv)
			s.at(s.now()+s.sc.Downtime.D(), func() {
				if err := s.start(sv); err != nil {
					panic(err) // the configuration started once already
				}
				s.changes = append(s.changes, change{s.now(), "the restart of " + sv.addr})
			})
		}
	case "failover":
		root := s.nodes[0]
		if root.master >= 0 {
			from := root.master
			s.mishaps = append(s.mishaps, Mishap{millis.Duration(s.now()), kind, root.servers[from].addr})
			s.changes = append(s.changes, change{s.now(), "a failover from " + root.servers[from].addr})
			s.elect(-1)
			s.at(s.now()+s.sc.FailoverGap.D(), func() {
				s.elect(1 - from)
				s.changes = append(s.changes, change{s.now(), root.servers[1-from].addr + " winning mastership"})
			})
		}
	}
	s.at(s.mishapGap(), s.mishap)
}

func (s *sim) sample() {
	var wants, has float64
	for _, c := range s.clients {
		wants += c.r.Wants()
		if capacity, _, ok := c.r.Lease(); ok {
			has += capacity
		}
	}
	s.samples = append(s.samples, Sample{T: millis.Duration(s.now()), Wants: wants, Has: has, Capacity: s.sc.Capacity,
		RootMaster: s.nodes[0].master >= 0})
}

// loop runs the events to the end, sampling every Sample after the
// events of that moment.
func (s *sim) loop() {
	end := epoch.Add(s.sc.Duration.D())
	for t := epoch; !t.After(end); t = t.Add(s.sc.Sample.D()) {
		s.events.RunUntil(t)
		s.sample()
	}
	s.events.RunUntil(end)
}

// at runs fn at simulated time t (since the start).
func (s *sim) at(t time.Duration, fn func()) { s.events.At(epoch.Add(t), fn) }

// schedule makes fn, an entity's tick, run at t, unless one of its ticks
// is pending at or before t (that tick schedules the next itself); *tk is
// the pending tick's time, zero when none is.
func (s *sim) schedule(tk *time.Time, t time.Time, fn func()) {
	if now := s.clk.Now(); t.Before(now) {
		t = now
	}
	if !tk.IsZero() && !t.Before(*tk) {
		return
	}
	*tk = t
	s.events.At(t, func() {
		if *tk != t {
			return // superseded by an earlier tick
		}
		*tk = time.Time{}
		fn()
	})
}

// stop stops the servers that are up.
func (s *sim) stop() {
	for _, sv := range s.up {
		sv.s.Stop()
	}
}

// woken ticks a server's parent link at once when it asked for it.
func (s *sim) woken(sv *srv) {
	if sv.s != nil && sv.parent != nil && sv.parent.Woken() {
		s.schedule(&sv.tick, s.clk.Now(), func() { s.tickServer(sv) })
	}
}

// dial opens an in-memory connection to the server at addr.
func (s *sim) dial(addr string) (pb.Conn, error) { return &conn{s: s, addr: addr}, nil }

// conn calls a server's RPC methods directly; both sides copy what they
// keep of a message, so messages pass as they are.
type conn struct {
	s    *sim
	addr string
}

func (c *conn) Close() error { return nil }

// call delivers one RPC to c's server, if it is up; wake, for the RPCs
// that may make it ask for a parent tick.
func call[Out any](c *conn, wake bool, rpc func(pb.CapacityServer) (Out, error)) (out Out, err error) {
	sv := c.s.up[c.addr]
	if sv == nil {
		return out, status.Errorf(codes.Unavailable, "doormansim: %s is down", c.addr)
	}
	c.s.rpcs++
	if wake {
		defer c.s.woken(sv)
	}
	return rpc(sv.rpcs)
}

func (c *conn) Discovery(ctx context.Context, in *pb.DiscoveryRequest, _ ...grpc.CallOption) (*pb.DiscoveryResponse, error) {
	return call(c, false, func(s pb.CapacityServer) (*pb.DiscoveryResponse, error) { return s.Discovery(ctx, in) })
}

func (c *conn) GetCapacity(ctx context.Context, in *pb.GetCapacityRequest, _ ...grpc.CallOption) (*pb.GetCapacityResponse, error) {
	return call(c, true, func(s pb.CapacityServer) (*pb.GetCapacityResponse, error) { return s.GetCapacity(ctx, in) })
}

func (c *conn) GetServerCapacity(ctx context.Context, in *pb.GetServerCapacityRequest, _ ...grpc.CallOption) (*pb.GetServerCapacityResponse, error) {
	return call(c, true, func(s pb.CapacityServer) (*pb.GetServerCapacityResponse, error) { return s.GetServerCapacity(ctx, in) })
}

func (c *conn) ReleaseCapacity(ctx context.Context, in *pb.ReleaseCapacityRequest, _ ...grpc.CallOption) (*pb.ReleaseCapacityResponse, error) {
	return call(c, false, func(s pb.CapacityServer) (*pb.ReleaseCapacityResponse, error) { return s.ReleaseCapacity(ctx, in) })
}

// election is the root servers' Election, decided by the simulation.
type election struct {
	ready  chan struct{} // closed once Run waits
	mu     sync.Mutex
	report func(server.Mastership)
}

// Run waits for the outcomes the simulation tells until ctx ends.
func (e *election) Run(ctx context.Context, _ string, report func(server.Mastership)) error {
	e.mu.Lock()
	e.report = report
	ready := e.ready
	e.mu.Unlock()
	close(ready)
	<-ctx.Done()
	e.mu.Lock()
	e.report = nil
	e.ready = make(chan struct{}) // for the next Run, after a restart
	e.mu.Unlock()
	return nil
}

// tell reports an outcome to the server.
func (e *election) tell(m server.Mastership) {
	e.mu.Lock()
	report := e.report
	e.mu.Unlock()
	if report != nil {
		report(m)
	}
}

// result condenses the run.
func (s *sim) result() Result {
	res := Result{Scenario: s.sc, Mishaps: s.mishaps, Samples: s.samples}
	sum := &res.Summary
	sum.From = millis.Duration(s.sc.LearningDuration())
	sum.RPCs = s.rpcs
	var used, overSum float64
	var nUsed int
	prevOver := false
	converged := make([]time.Duration, 0, len(s.samples))
	for _, smp := range s.samples {
		over := overCapacity(smp)
		if over {
			sum.Over++
			overSum += smp.Has
			sum.Max = math.Max(sum.Max, smp.Has)
			if !prevOver {
				sum.Episodes++
			}
		}
		prevOver = over
		if isConverged(smp) {
			converged = append(converged, smp.T.D())
		}
		if smp.T < sum.From {
			continue
		}
		if want := math.Min(smp.Wants, smp.Capacity); want > 0 {
			used += smp.Has / want
			nUsed++
		}
	}
	if nUsed > 0 {
		sum.Used = used / float64(nUsed)
	}
	if sum.Over > 0 {
		sum.MeanOver = overSum / float64(sum.Over)
	}
	// nextConverged returns the first converged sample at or after t.
	nextConverged := func(t time.Duration) time.Duration {
		if k, _ := slices.BinarySearch(converged, t); k < len(converged) {
			return converged[k]
		}
		return s.sc.Duration.D()
	}
	for _, ch := range s.changes {
		if ch.at < sum.From.D() {
			continue
		}
		if d := nextConverged(ch.at) - ch.at; d > sum.Reconverge.D() {
			sum.Reconverge, sum.ReconvergeAfter = millis.Duration(d), fmt.Sprintf("%s at %v", ch.what, ch.at)
		}
	}
	for _, m := range s.mishaps {
		if m.T < sum.From {
			continue
		}
		first := (m.T + s.sc.Sample - 1) / s.sc.Sample * s.sc.Sample // the first sample at or after it
		for t := first; t <= min(m.T+s.sc.LeaseLength+s.sc.Downtime, s.sc.Duration); t += s.sc.Sample {
			if smp := s.samples[t/s.sc.Sample]; !isConverged(smp) {
				if d := nextConverged(t.D()) - m.T.D(); d > sum.MishapReconverge.D() {
					sum.MishapReconverge, sum.MishapReconvergeAfter = millis.Duration(d), fmt.Sprintf("a %s of %s at %v", m.Kind, m.Target, m.T)
				}
				break
			}
		}
	}
	return res
}

// isConverged reports whether the clients hold at least ConvergedWithin
// of min(wants, capacity) and no more than the capacity.
func isConverged(smp Sample) bool {
	return smp.Has >= ConvergedWithin*math.Min(smp.Wants, smp.Capacity) && !overCapacity(smp)
}

// overCapacity reports whether the clients held more than the capacity.
func overCapacity(smp Sample) bool { return smp.Has > smp.Capacity*(1+1e-9) }
