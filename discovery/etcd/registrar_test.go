package etcd_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/discovery/etcd"
	"github.com/sluice-rpc/sluice/internal/testkit/slogtest"
	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

func gauge(scope tally.TestScope, name string) float64 {
	if g := scope.Snapshot().Gauges()[name+"+"]; g != nil {
		return g.Value()
	}
	return -1
}

func counter(scope tally.TestScope, name string) int64 {
	if c := scope.Snapshot().Counters()[name+"+"]; c != nil {
		return c.Value()
	}
	return 0
}

// Register writes PREFIX/host:port under a lease of the TTL, in the
// endpoints layout, and State and the metrics say so; Deregister deletes
// the key and revokes the lease, and a second call does nothing.
func TestRegistrationLifecycle(t *testing.T) {
	_, cli := startEtcd(t)
	scope := tally.NewTestScope("", nil)
	reg, err := etcd.NewRegistrar(etcd.RegistrarConfig{Client: cli, Prefix: "/" + prefix + "/", TTL: testTTL, Scope: scope,
		Metadata: map[string]any{"zone": "z1"}, Backoff: testBackoff})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := strings.TrimPrefix(cli.Endpoints()[0], "http://")
	if want := "etcd://" + endpoint + "//" + prefix; reg.String() != want {
		t.Errorf("String() = %q, want %q", reg.String(), want)
	}
	g, err := reg.Register("127.0.0.1:4001")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Register("127.0.0.1:4001"); err == nil || !strings.Contains(err.Error(), "registered already") {
		t.Errorf("registering 127.0.0.1:4001 twice: %v", err)
	}
	testwait.Until(t, "registered", func() bool { return g.State().Registered })
	st := g.State()
	if st.Registry != reg.String() || st.HostPort != "127.0.0.1:4001" || st.Registrations != 1 || st.Deregistered || st.LastError != "" || len(st.Lease) != 16 {
		t.Errorf("registered: %+v", st)
	}
	lease, err := strconv.ParseInt(st.Lease, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	key := "/" + prefix + "/127.0.0.1:4001"
	resp, err := cli.Get(ctxT(t), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get(%s) = %v, %v", key, resp, err)
	}
	if v, want := string(resp.Kvs[0].Value), `{"Op":0,"Addr":"127.0.0.1:4001","Metadata":{"zone":"z1"}}`; v != want {
		t.Errorf("value %s, want %s", v, want)
	}
	if resp.Kvs[0].Lease != lease {
		t.Errorf("key under lease %x, State says %s", resp.Kvs[0].Lease, st.Lease)
	}
	ttl, err := cli.TimeToLive(ctxT(t), clientv3.LeaseID(lease))
	if err != nil || ttl.GrantedTTL != int64(testTTL/time.Second) {
		t.Errorf("TimeToLive(%s) = %+v, %v; want granted for %v", st.Lease, ttl, err, testTTL)
	}
	if gauge(scope, "registration.registered") != 1 || counter(scope, "registration.writes") != 1 || counter(scope, "registration.errors") != 0 {
		t.Errorf("metrics: %+v %+v", scope.Snapshot().Gauges(), scope.Snapshot().Counters())
	}

	if err := g.Deregister(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if resp, err := cli.Get(ctxT(t), key); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("after Deregister Get(%s) = %v, %v; want no key", key, resp, err)
	}
	if ttl, err := cli.TimeToLive(ctxT(t), clientv3.LeaseID(lease)); err != nil || ttl.TTL != -1 {
		t.Errorf("after Deregister TimeToLive(%s) = %+v, %v; want the lease revoked (TTL -1)", st.Lease, ttl, err)
	}
	st = g.State()
	if st.Registered || !st.Deregistered || st.Lease != "" || st.Registrations != 1 {
		t.Errorf("deregistered: %+v", st)
	}
	if gauge(scope, "registration.registered") != 0 {
		t.Errorf("registration.registered = %v after Deregister, want 0", gauge(scope, "registration.registered"))
	}
	if err := g.Deregister(ctxT(t)); err != nil {
		t.Errorf("a second Deregister: %v", err)
	}
	// Deregistered, the address may be registered again.
	g2, err := reg.Register("127.0.0.1:4001")
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "registered again", func() bool { return g2.State().Registered })
	if err := g2.Deregister(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// Guards registration that never blocks nor fails the server: with etcd
// down Register returns at once and the failures show only in State and
// the metrics; when etcd is back (a healed partition) the address is
// registered. Deregister with etcd down gives up when its context ends;
// the key then goes with its lease, within the TTL.
//
// Its waits are a TTL each (the grant that fails, the lease that
// expires), so it registers with a TTL of 1 s, the shortest, which
// etcdtest's etcd grants as asked.
func TestRegistrationWhileEtcdDown(t *testing.T) {
	t.Parallel() // its own etcd; most of its time is waiting on the TTL
	et, cli := startEtcd(t)
	et.Kill()
	scope := tally.NewTestScope("", nil)
	reg, err := etcd.NewRegistrar(etcd.RegistrarConfig{Client: cli, Prefix: prefix, TTL: time.Second, Scope: scope, Backoff: testBackoff})
	if err != nil {
		t.Fatal(err)
	}
	g, err := reg.Register("127.0.0.1:4001")
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "a failure to register", func() bool { return counter(scope, "registration.errors") >= 1 })
	st := g.State()
	if st.Registered || st.Registrations != 0 || !strings.Contains(st.LastError, "granting a lease") || st.LastErrorTime.IsZero() {
		t.Errorf("with etcd down: %+v", st)
	}

	et.Restart()
	testwait.Until(t, "registered once etcd is back", func() bool { return g.State().Registered })
	if got := prefixHostPorts(t, cli); len(got) != 1 || got[0] != "127.0.0.1:4001" {
		t.Errorf("etcd holds %v", got)
	}

	et.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = g.Deregister(ctx)
	cancel()
	if err == nil {
		t.Fatal("Deregister with etcd down returned nil")
	}
	if st := g.State(); !st.Deregistered || st.Registered {
		t.Errorf("after a failed Deregister: %+v", st)
	}
	et.Restart()
	testwait.Until(t, "the key gone with its lease", func() bool { return len(prefixHostPorts(t, cli)) == 0 })
	// Tried again, it finds nothing left to do.
	if err := g.Deregister(ctxT(t)); err != nil {
		t.Errorf("Deregister again: %v", err)
	}
}

// Guards re-registration after a lease lost while etcd kept its data:
// the lease is revoked behind the registration's back (as if it had
// expired during a partition); the registration writes the key again,
// and the loss (Warn) and the new registration (Info) are logged.
func TestRegistrationLeaseLost(t *testing.T) {
	t.Parallel() // its own etcd; it waits on the lease's renewals
	_, cli := startEtcd(t)
	log := &slogtest.Lines{}
	reg, err := etcd.NewRegistrar(etcd.RegistrarConfig{Client: cli, Prefix: prefix, TTL: testTTL, Backoff: testBackoff, Logger: slog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	g, err := reg.Register("127.0.0.1:4001")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Deregister(ctxT(t))
	testwait.Until(t, "registered", func() bool { return g.State().Registered })
	lease, err := strconv.ParseInt(g.State().Lease, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctxT(t), clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "registered again", func() bool {
		st := g.State()
		return st.Registered && st.Registrations == 2
	})
	if st := g.State(); !strings.Contains(st.LastError, "lost") {
		t.Errorf("LastError %q, want the loss", st.LastError)
	}
	if got := prefixHostPorts(t, cli); len(got) != 1 {
		t.Errorf("etcd holds %v", got)
	}
	if log.CountPrefix("WARN etcd: registration failed", "lost", "key="+prefix+"/127.0.0.1:4001") != 1 || log.CountPrefix("INFO etcd: registered again") != 1 {
		t.Errorf("the log:\n%s\nwant the loss at Warn and the new registration at Info", log.String())
	}
}

func TestRegisterRejectsBadHostPort(t *testing.T) {
	cli := newClient(t, "http://"+testnet.Refused(t))
	reg, err := etcd.NewRegistrar(etcd.RegistrarConfig{Client: cli, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	for _, hp := range []string{"", "nonsense", "127.0.0.1:0", ":4001"} {
		if _, err := reg.Register(hp); err == nil {
			t.Errorf("Register(%q) succeeded", hp)
		}
	}
	var _ discovery.Registrar = reg
}
