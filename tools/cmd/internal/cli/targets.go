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

	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/discovery/dns"
	"github.com/sluice-rpc/sluice/internal/localfile"
)

// targetsHelp says what -P/--peer-list and --register take, for the help
// of call, bench and serve.
const targetsHelp = `Peer lists and registries (-P/--peer-list, serve --register; docs/discovery.md):

  FILE or file:FILE    a file of peers (host:port a line, optionally with a
                       weight, or a JSON or YAML list), followed as it changes
  dns:///HOST:PORT     the A/AAAA records of HOST, each address with PORT
  dns:///NAME          the SRV records of NAME, as a Kubernetes headless
                       service publishes them
  dns://SERVER/...     the same, asking the DNS server SERVER (host:port)
  etcd://HOST:PORT[,HOST:PORT...]/PREFIX
                       (sluice-lab's) the keys under PREFIX in etcd, watched;
                       TLS and credentials from the --etcd-* flags

A registry that fails never empties the peer list: the last good set stays.`

// EtcdFlags are the etcd client's TLS and credentials, for etcd:// targets,
// and what opens those targets (nil in sluice).
type EtcdFlags struct {
	cacert, cert, key, user string
	cmd                     string // the command's name, for the error of sluice
	etcd                    Etcd
}

func addEtcdFlags(fs *FlagSet, lab *Lab) *EtcdFlags {
	e := &EtcdFlags{cmd: strings.TrimPrefix(fs.Name(), "sluice "), etcd: lab.or().Etcd}
	fs.StringVar(&e.cacert, "etcd-cacert", "", "verify etcd's certificate with the CA certificates in `FILE` (PEM); turns on TLS")
	fs.StringVar(&e.cert, "etcd-cert", "", "present the client certificate in `FILE` (PEM) to etcd; needs --etcd-key")
	fs.StringVar(&e.key, "etcd-key", "", "the client certificate's private key `FILE` (PEM)")
	fs.StringVar(&e.user, "etcd-user", "", "authenticate to etcd as `USER[:PASSWORD]` (the password may come from $SLUICE_ETCD_PASSWORD instead)")
	return e
}

// Etcd follows and registers servers under etcd:// targets. It links
// etcd's client, and gRPC under it, so it is sluice-lab's (Lab.Etcd):
// sluice refuses an etcd:// target with a usage error naming sluice-lab.
type Etcd interface {
	// Resolver follows the servers under target, and returns what closes
	// the client it made.
	Resolver(target string, f *EtcdFlags) (discovery.Resolver, func(), error)
	// Registrar registers a server under target, its lease living ttl,
	// and returns what closes the client it made.
	Registrar(target string, ttl time.Duration, f *EtcdFlags) (discovery.Registrar, func(), error)
}

// DefaultRegisterTTL is serve --register-ttl's default: the etcd
// registrar's own (discovery/etcd.DefaultTTL; sluice-lab's tests check).
const DefaultRegisterTTL = 10 * time.Second

// errNoEtcd is the usage error of sluice, which opens no etcd:// target.
func (e *EtcdFlags) errNoEtcd() error {
	return errors.New(labOnly("an etcd:// target", e.cmd+" ... etcd://HOST:PORT/PREFIX ..."))
}

// Credentials returns --etcd-user's user and password (the password from
// $SLUICE_ETCD_PASSWORD when the flag has none); "" when not given.
func (e *EtcdFlags) Credentials() (user, password string) {
	if e.user == "" {
		return "", ""
	}
	user, password, ok := strings.Cut(e.user, ":")
	if !ok {
		password = os.Getenv("SLUICE_ETCD_PASSWORD")
	}
	return user, password
}

// maxPEMFile bounds each of the etcd flags' PEM files: 1 MiB, as
// tlsfiles bounds its own.
const maxPEMFile = 1 << 20

// TLSConfig returns the TLS of the etcd flags, nil when none is given.
// An error names the flag, and the file, that is wrong.
func (e *EtcdFlags) TLSConfig() (*tls.Config, error) {
	if e.cacert == "" && e.cert == "" && e.key == "" {
		return nil, nil
	}
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
func resolverFor(target string, e *EtcdFlags) (discovery.Resolver, func(), error) {
	nothing := func() {}
	switch {
	case strings.HasPrefix(target, "dns:"):
		r, err := dns.New(dns.Config{Target: target})
		return r, nothing, err
	case !strings.HasPrefix(target, "etcd://"):
		return nil, nothing, fmt.Errorf("%q is not a dns: or etcd: target", target)
	case e.etcd == nil:
		return nil, nothing, e.errNoEtcd()
	}
	return e.etcd.Resolver(target, e)
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
		if err := checkLoopback(a.HostPort); err != nil {
			u.Error(fmt.Errorf("%v (from the peer list)", err))
			return
		}
	}
	u.Updates.Update(addrs)
}
