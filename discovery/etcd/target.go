package etcd

import (
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-rpc/sluice/internal/hostport"
)

// Scheme is the scheme of an etcd target: etcd://HOST:PORT[,HOST:PORT...]/PREFIX.
const Scheme = "etcd"

// ParseTarget splits an etcd target, etcd://HOST:PORT[,HOST:PORT...]/PREFIX,
// into etcd's client endpoints (each HOST:PORT, as clientv3.Config takes
// them) and the prefix: everything after the slash that ends the
// endpoints, trailing slashes dropped. So etcd://10.0.0.9:2379/services/kv
// names prefix "services/kv", and etcd://10.0.0.9:2379//services/kv the
// prefix "/services/kv" (etcd keys need not start with a slash; the two
// are different prefixes). It is the form a Resolver's and a Registrar's
// String take.
func ParseTarget(target string) (endpoints []string, prefix string, err error) {
	rest, ok := strings.CutPrefix(target, Scheme+"://")
	if !ok {
		return nil, "", fmt.Errorf("etcd: target %q does not start with %s://, want etcd://HOST:PORT[,HOST:PORT...]/PREFIX", target, Scheme)
	}
	hosts, path, ok := strings.Cut(rest, "/")
	if !ok {
		return nil, "", fmt.Errorf("etcd: target %q has no prefix, want etcd://HOST:PORT[,HOST:PORT...]/PREFIX", target)
	}
	if hosts == "" {
		return nil, "", fmt.Errorf("etcd: target %q names no etcd endpoint, want etcd://HOST:PORT[,HOST:PORT...]/PREFIX", target)
	}
	for i, hp := range strings.Split(hosts, ",") {
		if err := hostport.Validate(hp); err != nil {
			return nil, "", fmt.Errorf("etcd: target %q: endpoint %d: %v", target, i+1, err)
		}
		endpoints = append(endpoints, hp)
	}
	if prefix = normalizePrefix(path); prefix == "" {
		return nil, "", fmt.Errorf("etcd: target %q has an empty prefix, want etcd://HOST:PORT[,HOST:PORT...]/PREFIX", target)
	}
	return endpoints, prefix, nil
}

// targetName returns etcd://<cli's endpoints, without scheme>/<prefix>.
func targetName(cli *clientv3.Client, prefix string) string {
	eps := cli.Endpoints()
	hosts := make([]string, len(eps))
	for i, e := range eps {
		if _, hp, ok := strings.Cut(e, "://"); ok {
			e = hp
		}
		hosts[i] = strings.TrimRight(e, "/")
	}
	return Scheme + "://" + strings.Join(hosts, ",") + "/" + prefix
}
