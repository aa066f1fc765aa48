package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"

	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/discovery/dns"
	"github.com/sluice-rpc/sluice/discovery/etcd"
	"github.com/sluice-rpc/sluice/internal/localfile"
)

// targetsHelp says what -P/--peer-list and --register take, for the help
// of call, bench and serve.
const targetsHelp = `Peer lists and registries (-P/--peer-list, serve --register):

  FILE or file:FILE    a file of peers, one host:port a line (optionally
                       followed by a weight), or a JSON or YAML list; read
                       again every second, its changes followed
  dns:///HOST:PORT     the A/AAAA records of HOST, each address with PORT,
                       looked up again every 30s and when a peer fails
  dns:///NAME          the SRV records of NAME (ports and weights from the
                       records), as a Kubernetes headless service publishes
                       them: dns:///_tchannel._tcp.kv.default.svc.cluster.local
  dns://SERVER/...     the same, asking the DNS server SERVER (host:port)
  etcd://HOST:PORT[,HOST:PORT...]/PREFIX
                       the keys under PREFIX in etcd, watched, in the layout
                       of etcd's naming/endpoints (shared with gRPC); with
                       --etcd-cacert, --etcd-cert, --etcd-key for TLS and
                       --etcd-user USER[:PASSWORD] (or $SLUICE_ETCD_PASSWORD)

A registry that fails never empties the peer list: the last good set stays.`

// etcdFlags are the etcd client's TLS and credentials, for etcd:// targets.
type etcdFlags struct{ cacert, cert, key, user string }

func addEtcdFlags(fs *FlagSet) *etcdFlags {
	e := &etcdFlags{}
	fs.StringVar(&e.cacert, "etcd-cacert", "", "verify etcd's certificate with the CA certificates in `FILE` (PEM); turns on TLS")
	fs.StringVar(&e.cert, "etcd-cert", "", "present the client certificate in `FILE` (PEM) to etcd; needs --etcd-key")
	fs.StringVar(&e.key, "etcd-key", "", "the client certificate's private key `FILE` (PEM)")
	fs.StringVar(&e.user, "etcd-user", "", "authenticate to etcd as `USER[:PASSWORD]` (the password may come from $SLUICE_ETCD_PASSWORD instead)")
	return e
}

// client connects to the etcd endpoints with the flags' TLS and
// credentials. etcd's client connects lazily: a cluster that is down is
// found by the first request, not here. Its reconnects wait at most 2 s
// (gRPC's default backoff grows to 120 s), so that an etcd back from an
// outage is followed again at once.
func (e *etcdFlags) client(endpoints []string) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		})}}
	if e.cacert != "" || e.cert != "" || e.key != "" {
		tc, err := e.tlsConfig()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	if e.user != "" {
		user, pass, ok := strings.Cut(e.user, ":")
		if !ok {
			pass = os.Getenv("SLUICE_ETCD_PASSWORD")
		}
		cfg.Username, cfg.Password = user, pass
	}
	return clientv3.New(cfg)
}

// maxPEMFile bounds each of the etcd flags' PEM files: 1 MiB, as
// tlsfiles bounds its own.
const maxPEMFile = 1 << 20

func (e *etcdFlags) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if (e.cert == "") != (e.key == "") {
		return nil, errors.New("--etcd-cert and --etcd-key go together: give both, or neither")
	}
	if e.cert != "" {
		certPEM, err := localfile.Read(e.cert, maxPEMFile, "a PEM file")
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert: %v", err)
		}
		keyPEM, err := localfile.Read(e.key, maxPEMFile, "a PEM file")
		if err != nil {
			return nil, fmt.Errorf("--etcd-key: %v", err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert/--etcd-key: %v", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	if e.cacert != "" {
		pem, err := localfile.Read(e.cacert, maxPEMFile, "a PEM file")
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-cacert %s: no PEM certificate in it", e.cacert)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

// resolverFor returns the resolver of a dns: or etcd: -P/--peer-list
// target, and what closes the client it made (a no-op when none).
func resolverFor(target string, e *etcdFlags) (discovery.Resolver, func(), error) {
	nothing := func() {}
	switch {
	case strings.HasPrefix(target, "dns:"):
		r, err := dns.New(dns.Config{Target: target})
		return r, nothing, err
	case strings.HasPrefix(target, etcd.Scheme+"://"):
		eps, prefix, err := etcd.ParseTarget(target)
		if err != nil {
			return nil, nothing, err
		}
		cli, err := e.client(eps)
		if err != nil {
			return nil, nothing, fmt.Errorf("etcd %s: %v", strings.Join(eps, ","), err)
		}
		r, err := etcd.NewResolver(etcd.ResolverConfig{Client: cli, Prefix: prefix})
		if err != nil {
			cli.Close()
			return nil, nothing, err
		}
		return r, func() { cli.Close() }, nil
	}
	return nil, nothing, fmt.Errorf("%q is not a dns: or etcd: target", target)
}

// registrarFor returns the registrar of a serve --register target (etcd
// only), and what closes its client.
func registrarFor(target string, ttl time.Duration, e *etcdFlags) (discovery.Registrar, func(), error) {
	eps, prefix, err := etcd.ParseTarget(target)
	if err != nil {
		return nil, nil, err
	}
	cli, err := e.client(eps)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd %s: %v", strings.Join(eps, ","), err)
	}
	r, err := etcd.NewRegistrar(etcd.RegistrarConfig{Client: cli, Prefix: prefix, TTL: ttl})
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	return r, func() { cli.Close() }, nil
}

// loopbackOnly passes on a resolver's sets only while every peer in them
// is on a loopback address: bench's guard against loading a remote
// service by accident (--allow-remote lifts it), applied to the peers a
// registry names.
type loopbackOnly struct{ discovery.Resolver }

func (l loopbackOnly) Resolve(ctx context.Context, u discovery.Updates) {
	l.Resolver.Resolve(ctx, loopbackUpdates{u})
}

type loopbackUpdates struct{ discovery.Updates }

func (u loopbackUpdates) Update(addrs []discovery.Address) {
	for _, a := range addrs {
		if err := checkLoopback(a.HostPort, false); err != nil {
			u.Error(fmt.Errorf("%v (from the peer list)", err))
			return
		}
	}
	u.Updates.Update(addrs)
}
