package etcd_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/naming/endpoints"

	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/discovery/etcd"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/internal/watch"
)

// The resolver reports the prefix's set, then every change to it: a put,
// an overwrite, a delete. Keys beside the prefix (services/kvx) are not
// its peers.
func TestResolverFollowsPrefix(t *testing.T) {
	_, cli := startEtcd(t)
	putPeer(t, cli, prefix+"/a", "127.0.0.1:4001")
	put(t, cli, prefix+"/b", `{"Addr":"127.0.0.1:4002","Metadata":{"weight":2.5,"zone":"z1"}}`) // no Op
	putPeer(t, cli, prefix+"x/c", "127.0.0.1:4009")
	cfg := resolverConfig(cli)
	cfg.Prefix = prefix + "//" // trailing slashes are dropped
	r, err := etcd.NewResolver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	endpoint := strings.TrimPrefix(cli.Endpoints()[0], "http://")
	if want := "etcd://" + endpoint + "/" + prefix; r.String() != want {
		t.Errorf("String() = %q, want %q", r.String(), want)
	}
	rec := newRecorder()
	resolve(t, r, rec)
	set := rec.waitSet(t, "127.0.0.1:4001", "127.0.0.1:4002")
	if want := (discovery.Address{HostPort: "127.0.0.1:4002", Weight: 2.5, Metadata: map[string]any{"weight": 2.5, "zone": "z1"}}); !reflect.DeepEqual(set[1], want) {
		t.Errorf("b read as %+v, want %+v", set[1], want)
	}
	putPeer(t, cli, prefix+"/c", "127.0.0.1:4003")
	rec.waitSet(t, "127.0.0.1:4001", "127.0.0.1:4002", "127.0.0.1:4003")
	putPeer(t, cli, prefix+"/a", "127.0.0.1:4004")
	rec.waitSet(t, "127.0.0.1:4004", "127.0.0.1:4002", "127.0.0.1:4003")
	del(t, cli, prefix+"/b")
	rec.waitSet(t, "127.0.0.1:4004", "127.0.0.1:4003")
	if errs := rec.errors(); len(errs) != 0 {
		t.Errorf("errors reported: %v", errs)
	}
}

// Guards skipping bad values: a value that is not an endpoint's JSON, or
// has no valid Addr, is left out and reported by key, after the rest of
// the set, and later changes still flow. Without it the set would stop at
// (or never reach) the first bad key.
func TestResolverSkipsBadValues(t *testing.T) {
	_, cli := startEtcd(t)
	putPeer(t, cli, prefix+"/good1", "127.0.0.1:4001")
	put(t, cli, prefix+"/garbage", "not json")
	rec := newRecorder()
	r, err := etcd.NewResolver(resolverConfig(cli))
	if err != nil {
		t.Fatal(err)
	}
	resolve(t, r, rec)
	rec.waitSet(t, "127.0.0.1:4001")
	rec.waitError(t, `key "services/kv/garbage": the value is not an endpoint's JSON`)

	put(t, cli, prefix+"/noaddr", `{"Op":0,"Metadata":{"weight":1}}`)
	put(t, cli, prefix+"/badport", `{"Addr":"127.0.0.1:99999"}`)
	put(t, cli, prefix+"/badweight", `{"Addr":"127.0.0.1:4005","Metadata":{"weight":"heavy"}}`)
	putPeer(t, cli, prefix+"/good2", "127.0.0.1:4002")
	rec.waitSet(t, "127.0.0.1:4001", "127.0.0.1:4002")
	err = rec.waitError(t, "left out with 3 more keys")
	for _, key := range []string{"garbage", "noaddr", "badport"} {
		if !strings.Contains(err.Error(), prefix+"/"+key) {
			t.Errorf("the error %q does not name %s", err, key)
		}
	}

	// Mended, the keys come back.
	putPeer(t, cli, prefix+"/garbage", "127.0.0.1:4003")
	del(t, cli, prefix+"/noaddr")
	del(t, cli, prefix+"/badport")
	del(t, cli, prefix+"/badweight")
	rec.waitSet(t, "127.0.0.1:4003", "127.0.0.1:4001", "127.0.0.1:4002")
}

// Guards the resync after compaction: the resolver's watch starts from a
// revision etcd has compacted away (the test holds the resolver in its
// first Update, between its read and its watch, while it changes the
// prefix and compacts), so the changes can only be learned by reading
// the prefix again. Without the resync the set stays the first one.
func TestResolverResyncsAfterCompaction(t *testing.T) {
	_, cli := startEtcd(t)
	for i := range 5 {
		putPeer(t, cli, fmt.Sprintf("%s/k%d", prefix, i), fmt.Sprintf("127.0.0.1:%d", 4000+i))
	}
	rec := newRecorder()
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	rec.gate = func() { once.Do(func() { close(held); <-release }) }
	r, err := etcd.NewResolver(resolverConfig(cli))
	if err != nil {
		t.Fatal(err)
	}
	resolve(t, r, rec)
	testwait.Recv(t, held, "the resolver's first Update")

	for i := range 3 {
		del(t, cli, fmt.Sprintf("%s/k%d", prefix, i))
	}
	for i := 5; i < 10; i++ {
		putPeer(t, cli, fmt.Sprintf("%s/k%d", prefix, i), fmt.Sprintf("127.0.0.1:%d", 4000+i))
	}
	var rev int64
	for i := range 50 {
		rev = put(t, cli, "elsewhere/churn", fmt.Sprint(i))
	}
	if _, err := cli.Compact(ctxT(t), rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	close(release)

	want := []string{"127.0.0.1:4003", "127.0.0.1:4004", "127.0.0.1:4005", "127.0.0.1:4006", "127.0.0.1:4007", "127.0.0.1:4008", "127.0.0.1:4009"}
	rec.waitSet(t, want...)
	if got := prefixHostPorts(t, cli); !slices.Equal(got, want) {
		t.Errorf("etcd holds %v, the resolver reported %v", got, want)
	}
	// A compaction is no failure: nothing was reported as one.
	if errs := rec.errors(); len(errs) != 0 {
		t.Errorf("errors reported: %v", errs)
	}
	// And the new watch follows.
	putPeer(t, cli, prefix+"/k0", "127.0.0.1:4000")
	rec.waitSet(t, append([]string{"127.0.0.1:4000"}, want...)...)
}

// Guards the progress check and the resync after an outage: with etcd
// killed, the Watcher's State turns FAILING (without the check the watch
// just waits, silent, and the State stays OK) while the set stays applied
// (nothing empties it); once etcd is back with its data, a new key flows
// again.
func TestResolverThroughEtcdOutage(t *testing.T) {
	t.Parallel() // its own etcd; it waits on the progress checks
	et, cli := startEtcd(t)
	putPeer(t, cli, prefix+"/a", "127.0.0.1:4001")
	putPeer(t, cli, prefix+"/b", "127.0.0.1:4002")
	r, err := etcd.NewResolver(resolverConfig(cli))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var applied [][]string
	w, err := watch.New(watch.Config{Resolver: r, Apply: func(a []discovery.Address) error {
		mu.Lock()
		defer mu.Unlock()
		applied = append(applied, hostPorts(a))
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	testwait.Until(t, "the Watcher OK with 2 peers", func() bool {
		st := w.State()
		return st.Status == watch.OK && st.Peers == 2
	})

	et.Kill()
	testwait.Until(t, "the Watcher FAILING with etcd killed", func() bool { return w.State().Status == watch.Failing })
	st := w.State()
	if st.Peers != 2 {
		t.Fatalf("with etcd killed the Watcher has %d peers, want the 2 it had", st.Peers)
	}
	t.Logf("with etcd killed: %s", st.LastError)

	et.Restart()
	putPeer(t, cli, prefix+"/c", "127.0.0.1:4003")
	testwait.Until(t, "the Watcher OK with 3 peers", func() bool {
		st := w.State()
		return st.Status == watch.OK && st.Peers == 3
	})
	mu.Lock()
	defer mu.Unlock()
	for _, set := range applied {
		if len(set) < 2 {
			t.Errorf("applied %v: the outage shrank the set", set)
		}
	}
}

// Guards the new-data-dir detection and re-registration: etcd comes back
// on the same endpoint with an empty store, its revisions starting again
// from 1. The registrar's lease is gone: it registers again within about
// its TTL. The resolver's watch, resumed from the old store's revision,
// would wait until the new store caught up, still listing the key that
// vanished with the old store; it sees the revision go back (or the
// outage) and reads the prefix afresh: the stale key goes, the new
// registration appears.
func TestAfterEtcdRestartedEmpty(t *testing.T) {
	et, cli := startEtcd(t)
	putPeer(t, cli, prefix+"/stale", "127.0.0.1:4009")
	for i := range 20 { // the old store's revision well above the new one's
		put(t, cli, "elsewhere/churn", fmt.Sprint(i))
	}
	reg, err := etcd.NewRegistrar(etcd.RegistrarConfig{Client: cli, Prefix: prefix, TTL: testTTL, Backoff: testBackoff})
	if err != nil {
		t.Fatal(err)
	}
	g, err := reg.Register("127.0.0.1:4001")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("the registration: %+v", g.State())
		}
		if err := g.Deregister(ctxT(t)); err != nil {
			t.Error(err)
		}
	}()
	cfg := resolverConfig(cli)
	// Checks less frequent than the restart is long (etcdtest's etcd
	// answers again within a few hundred ms), so that the revision going
	// back, not the outage, is what the resolver sees (most of the time:
	// either makes it read afresh).
	cfg.CheckInterval = time.Second
	r, err := etcd.NewResolver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	resolve(t, r, rec)
	rec.waitSet(t, "127.0.0.1:4001", "127.0.0.1:4009")
	// The resolver can see the key before the registration has its Put's
	// answer: killed then, etcd would fail the Put, and the registration
	// written after the restart would be its first.
	testwait.Until(t, "registered", func() bool { return g.State().Registered })
	lease := g.State().Lease

	et.RestartEmpty()
	restarted := time.Now()
	testwait.Until(t, "registered again", func() bool {
		st := g.State()
		return st.Registered && st.Registrations >= 2
	})
	took := time.Since(restarted)
	t.Logf("registered again %v after etcd answered", took.Round(time.Millisecond))
	if st := g.State(); st.Lease == lease || st.LastError == "" {
		t.Errorf("after etcd came back empty: %+v, want a new lease and the loss in LastError", st)
	}
	if took > 2*testTTL {
		t.Errorf("registered again %v after etcd answered, want within about the TTL (%v)", took, testTTL)
	}
	rec.waitSet(t, "127.0.0.1:4001")
	if got := prefixHostPorts(t, cli); !slices.Equal(got, []string{"127.0.0.1:4001"}) {
		t.Errorf("etcd holds %v", got)
	}
	for _, err := range rec.errors() {
		t.Logf("reported: %v", err)
	}
}

// Interoperability with etcd's naming/endpoints: an endpoint a gRPC
// program adds with endpoints.Manager is a peer (its weight from
// Metadata.weight); an address a Registrar registers is listed by
// endpoints.Manager.
func TestInteropWithEndpointsManager(t *testing.T) {
	_, cli := startEtcd(t)
	em, err := endpoints.NewManager(cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := em.AddEndpoint(ctxT(t), prefix+"/grpc-1", endpoints.Endpoint{Addr: "127.0.0.1:5001",
		Metadata: map[string]any{"weight": 3, "version": "v2"}}); err != nil {
		t.Fatal(err)
	}
	r, err := etcd.NewResolver(resolverConfig(cli))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	resolve(t, r, rec)
	set := rec.waitSet(t, "127.0.0.1:5001")
	if want := (discovery.Address{HostPort: "127.0.0.1:5001", Weight: 3, Metadata: map[string]any{"weight": 3.0, "version": "v2"}}); !reflect.DeepEqual(set[0], want) {
		t.Errorf("endpoints.Manager's endpoint read as %+v, want %+v", set[0], want)
	}

	// The default TTL (10 s), not the tests' 2 s: this test is about the
	// layout, and on a loaded machine a 2 s lease can lapse between two
	// renewals, taking the key away for a moment (it is written again).
	reg, err := etcd.NewRegistrar(etcd.RegistrarConfig{Client: cli, Prefix: prefix, Weight: 2,
		Metadata: map[string]any{"zone": "z1"}, Backoff: testBackoff})
	if err != nil {
		t.Fatal(err)
	}
	g, err := reg.Register("127.0.0.1:5002")
	if err != nil {
		t.Fatal(err)
	}
	set = rec.waitSet(t, "127.0.0.1:5002", "127.0.0.1:5001") // in key order: services/kv/127... before services/kv/grpc-1
	if set[0].Weight != 2 {
		t.Errorf("the registered address read with weight %v, want 2", set[1].Weight)
	}
	// Listed as the resolver saw it. On a loaded machine the registration
	// can lapse and be written again between the two reads (the
	// Registrar's job): the key must come back as it was.
	want := endpoints.Endpoint{Addr: "127.0.0.1:5002", Metadata: map[string]any{"weight": 2.0, "zone": "z1"}}
	var list map[string]endpoints.Endpoint
	ctx := ctxT(t)
	testwait.Until(t, "endpoints.Manager to list the registered address", func() bool {
		if list, err = em.List(ctx); err != nil {
			t.Fatal(err)
		}
		_, ok := list[prefix+"/127.0.0.1:5002"]
		return ok
	})
	if got := list[prefix+"/127.0.0.1:5002"]; !reflect.DeepEqual(got, want) {
		t.Errorf("endpoints.Manager lists %+v, want %+v (all: %+v)", got, want, list)
	}
	if err := em.DeleteEndpoint(ctxT(t), prefix+"/grpc-1"); err != nil {
		t.Fatal(err)
	}
	rec.waitSet(t, "127.0.0.1:5002")
	if err := g.Deregister(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	list, err = em.List(ctxT(t))
	if err != nil || len(list) != 0 {
		t.Errorf("after Deregister endpoints.Manager lists %v, %v; want nothing", list, err)
	}
}
