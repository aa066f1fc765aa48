package etcd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/discovery/etcd"
	"github.com/sluice-rpc/sluice/internal/testkit/etcdtest"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// The tests shorten every interval so that an outage and its recovery take
// a second or two: progress checked every 200 ms, retries after 20..200 ms,
// leases of 2 s. etcdtest's etcd grants 1 s, but etcd's client renews a
// lease every 500 ms at most often and gives it up when a TTL passes
// without an answer: with 1 s, half a second's stall on a loaded machine
// would lose a registration.
const (
	prefix        = "services/kv"
	checkInterval = 200 * time.Millisecond
	testTTL       = 2 * time.Second
)

var testBackoff = backoff.Exponential{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond, Multiplier: 2,
	Jitter: backoff.EqualJitter}

// newClient returns a client of the etcd at endpoint, closed when t ends.
// Its gRPC connection retries within 300 ms (gRPC's default waits up to
// 120 s), so that a restarted etcd is reached again at once.
func newClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: 300 * time.Millisecond},
			MinConnectTimeout: time.Second,
		})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// ctxT returns a context that ends with the test, at most after
// testwait.Limit.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, cli *clientv3.Client, key, value string) int64 {
	t.Helper()
	resp, err := cli.Put(ctxT(t), key, value)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return resp.Header.Revision
}

// putPeer writes key's value as etcd's endpoints manager would.
func putPeer(t *testing.T, cli *clientv3.Client, key, hostPort string) {
	t.Helper()
	put(t, cli, key, fmt.Sprintf(`{"Op":0,"Addr":%q,"Metadata":null}`, hostPort))
}

func del(t *testing.T, cli *clientv3.Client, key string) {
	t.Helper()
	if _, err := cli.Delete(ctxT(t), key); err != nil {
		t.Fatalf("delete %s: %v", key, err)
	}
}

// resolverConfig is the tests' configuration of a resolver of prefix.
func resolverConfig(cli *clientv3.Client) etcd.ResolverConfig {
	return etcd.ResolverConfig{Client: cli, Prefix: prefix, CheckInterval: checkInterval, Timeout: time.Second, Backoff: testBackoff}
}

// resolve runs r until the test ends, reporting to u.
func resolve(t *testing.T, r discovery.Resolver, u discovery.Updates) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Resolve(ctx, u)
	}()
	t.Cleanup(func() {
		cancel()
		testwait.Recv(t, done, "Resolve to return when its context ended")
	})
}

// recorder is a discovery.Updates that keeps every report.
type recorder struct {
	// gate, if set, runs in Update after the set is recorded (the
	// resolver waits for it).
	gate func()

	mu      sync.Mutex
	sets    [][]discovery.Address
	errs    []error
	changed chan struct{} // receives after each report (coalesced)
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) Update(addrs []discovery.Address) {
	r.mu.Lock()
	r.sets = append(r.sets, addrs)
	gate := r.gate
	r.mu.Unlock()
	r.signal()
	if gate != nil {
		gate()
	}
}

func (r *recorder) Error(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
	r.signal()
}

func (r *recorder) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) ResolveNow() <-chan struct{} { return nil }

// last returns the last set reported (nil if none) and the number of
// errors reported.
func (r *recorder) last() ([]discovery.Address, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sets) == 0 {
		return nil, len(r.errs)
	}
	return r.sets[len(r.sets)-1], len(r.errs)
}

// errors returns the errors reported so far.
func (r *recorder) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

// waitFor waits until cond holds of the reports, failing the test after
// testwait.Limit.
func (r *recorder) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timer := time.NewTimer(testwait.Limit)
	defer timer.Stop()
	for !cond() {
		select {
		case <-r.changed:
		case <-timer.C:
			sets, _ := r.last()
			t.Fatalf("waited %v for %s; last set %v, errors %v", testwait.Limit, what, hostPorts(sets), r.errors())
		}
	}
}

// waitSet waits until the last set reported is exactly hps, in order.
func (r *recorder) waitSet(t *testing.T, hps ...string) []discovery.Address {
	t.Helper()
	var set []discovery.Address
	r.waitFor(t, "the set "+strings.Join(hps, ","), func() bool {
		set, _ = r.last()
		return set != nil && slices.Equal(hostPorts(set), hps)
	})
	return set
}

// waitError waits until an error containing sub has been reported.
func (r *recorder) waitError(t *testing.T, sub string) error {
	t.Helper()
	var found error
	r.waitFor(t, "an error containing "+sub, func() bool {
		for _, err := range r.errors() {
			if strings.Contains(err.Error(), sub) {
				found = err
				return true
			}
		}
		return false
	})
	return found
}

func hostPorts(addrs []discovery.Address) []string {
	hps := []string{}
	for _, a := range addrs {
		hps = append(hps, a.HostPort)
	}
	return hps
}

// prefixHostPorts returns the addresses etcd holds under prefix now, in
// key order.
func prefixHostPorts(t *testing.T, cli *clientv3.Client) []string {
	t.Helper()
	resp, err := cli.Get(ctxT(t), prefix+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	hps := []string{}
	for _, kv := range resp.Kvs {
		var v struct{ Addr string }
		if json.Unmarshal(kv.Value, &v) == nil && v.Addr != "" {
			hps = append(hps, v.Addr)
		}
	}
	return hps
}

// startEtcd starts etcd and returns it with a client.
func startEtcd(t *testing.T) (*etcdtest.Etcd, *clientv3.Client) {
	et := etcdtest.Start(t)
	return et, newClient(t, et.Endpoint)
}
