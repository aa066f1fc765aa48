package dns_test

import (
	"fmt"

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

// A Watcher runs the resolver and applies each set it finds, keeping the
// last good one while DNS fails. An IP address needs no DNS server, so this
// example runs anywhere.
func ExampleNew() {
	r, err := dns.New(dns.Config{Target: "dns:///127.0.0.1:4040"})
	if err != nil {
		fmt.Println(err)
		return
	}
	sets := make(chan []discovery.Address, 1)
	w, err := discovery.Watch(discovery.WatcherConfig{Resolver: r, Apply: func(a []discovery.Address) error {
		sets <- a
		return nil
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	for _, a := range <-sets {
		fmt.Println(a.HostPort, "weight", a.Weight)
	}
	fmt.Println(w.State().Target)
	// Output:
	// 127.0.0.1:4040 weight 1
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
	w, err := discovery.Watch(discovery.WatcherConfig{Resolver: r, Apply: func(a []discovery.Address) error {
		fmt.Println(len(a), "pods")
		return nil
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	// ... the Channel calls w.ResolveNow() when a peer fails.
}
