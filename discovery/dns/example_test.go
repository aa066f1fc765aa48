package dns_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/channel"

	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/discovery/dns"
)

// A target names what to look up and, optionally, the DNS server to ask.
func ExampleParseTarget() {
	for _, s := range []string{"dns:///kv.example:4040", "dns://10.0.0.2/kv.example:4040", "dns:///_kv._tcp.example."} {
		t, err := dns.ParseTarget(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: server %q, host %q, SRV %v\n", t, t.Server, t.Host, t.SRV())
	}
	_, err := dns.ParseTarget("dns:///kv.example:http")
	fmt.Println(err)
	// Output:
	// dns:///kv.example:4040: server "", host "kv.example", SRV false
	// dns://10.0.0.2:53/kv.example:4040: server "10.0.0.2:53", host "kv.example", SRV false
	// dns:///_kv._tcp.example.: server "", host "_kv._tcp.example.", SRV true
	// dns: Target "dns:///kv.example:http": port "http" is not a number from 1 to 65535; write dns:///kv.example:4040, dns://10.0.0.2:53/kv.example:4040, or dns:///_kv._tcp.example. for SRV records
}

// A resolver reports each set it finds to the Updates it runs with: a
// Channel's Client gives it its own (channel.WithResolver), and applies
// each set to its peers. Here firstSet stands in for it. An IP address
// needs no DNS server, so this example runs anywhere.
func ExampleNew() {
	r, err := dns.New(dns.Config{Target: "dns:///127.0.0.1:4040"})
	if err != nil {
		fmt.Println(err)
		return
	}
	set, err := firstSet(r)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range set {
		fmt.Println(a.HostPort, "weight", a.Weight) // 0: no weight given, so 1 like every other peer
	}
	fmt.Println(r)
	// Output:
	// 127.0.0.1:4040 weight 0
	// dns:///127.0.0.1:4040
}

// The SRV records of a Kubernetes headless service's port name one target
// per pod: each pod is a peer at its own address and port. The cluster's
// DNS server is the system's, so the target names none.
func ExampleNew_srv() {
	r, err := dns.New(dns.Config{Target: "dns:///_grpc._tcp.kv.default.svc.cluster.local."})
	if err != nil {
		fmt.Println(err)
		return
	}
	ch, err := channel.New("kv-client")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ch.Close()
	kv, err := ch.NewClient("kv", channel.WithResolver(r))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = kv // its calls go to the pods; it looks up again when a peer fails
}

// updates is the Updates firstSet runs a resolver with.
type updates struct {
	sets chan []discovery.Address
	errs chan error
}

func (u updates) Update(a []discovery.Address) {
	select {
	case u.sets <- a:
	default:
	}
}

func (u updates) Error(err error) {
	select {
	case u.errs <- err:
	default:
	}
}

func (u updates) ResolveNow() <-chan struct{} { return nil }

// firstSet runs r until it reports its first set or failure, and stops it.
func firstSet(r discovery.Resolver) ([]discovery.Address, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	u := updates{sets: make(chan []discovery.Address, 1), errs: make(chan error, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Resolve(ctx, u)
	}()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case set := <-u.sets:
		return set, nil
	case err := <-u.errs:
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
