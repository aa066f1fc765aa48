package discovery

import (
	"context"
	"slices"
	"strings"
)

// Static returns a Resolver of a fixed set of peers: it reports addrs once
// and never changes them.
func Static(addrs ...Address) Resolver { return static(slices.Clone(addrs)) }

// StaticHostPorts returns a Static resolver of the peers at hostPorts, each
// of weight 1.
func StaticHostPorts(hostPorts ...string) Resolver {
	addrs := make([]Address, len(hostPorts))
	for i, hp := range hostPorts {
		addrs[i] = Address{HostPort: hp}
	}
	return static(addrs)
}

type static []Address

func (s static) Resolve(ctx context.Context, u Updates) {
	u.Update(slices.Clone(s))
	<-ctx.Done()
}

func (s static) String() string {
	hps := make([]string, len(s))
	for i, a := range s {
		hps[i] = a.HostPort
	}
	return "static:" + strings.Join(hps, ",")
}
