package etcd_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluice-rpc/sluice/channel"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-rpc/sluice/discovery/etcd"
)

// A server announces itself under services/kv while it runs; a client
// follows the servers there. (channel.WithRegistrar and
// channel.WithResolver do the same for a Channel.)
func Example() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"10.0.0.9:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	// The server: registered within moments of etcd answering, and again
	// whenever etcd loses it; gone within 10 s (the TTL) if it dies.
	reg, err := etcd.NewRegistrar(etcd.RegistrarConfig{Client: cli, Prefix: "services/kv", Weight: 2})
	if err != nil {
		log.Fatal(err)
	}
	g, err := reg.Register("10.0.0.1:4040")
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.Deregister(ctx); err != nil {
			log.Print(err) // etcd drops it when its lease expires
		}
	}()

	// The client.
	res, err := etcd.NewResolver(etcd.ResolverConfig{Client: cli, Prefix: "services/kv"})
	if err != nil {
		log.Fatal(err)
	}
	ch, err := channel.New("kv-client")
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	kv, err := ch.NewClient("kv", channel.WithResolver(res))
	if err != nil {
		log.Fatal(err)
	}
	log.Print(kv.Peers()) // the registered servers, as etcd reports them
}

// The command line names an etcd target as etcd://ENDPOINTS/PREFIX.
func ExampleParseTarget() {
	endpoints, prefix, err := etcd.ParseTarget("etcd://10.0.0.9:2379,10.0.0.10:2379/services/kv")
	fmt.Println(endpoints, prefix, err)
	_, _, err = etcd.ParseTarget("etcd://10.0.0.9/services/kv")
	fmt.Println(err)
	// Output:
	// [10.0.0.9:2379 10.0.0.10:2379] services/kv <nil>
	// etcd: target "etcd://10.0.0.9/services/kv": endpoint 1: peer: bad host:port "10.0.0.9": address 10.0.0.9: missing port in address
}
