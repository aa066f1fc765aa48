package channel_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/discovery"
)

// A client whose peers come from a resolver: here a static one; dns.New,
// etcd.NewResolver and file.New follow a registry the same way.
func ExampleWithResolver() {
	server, err := channel.New("kv")
	if err != nil {
		panic(err)
	}
	defer server.Close()
	server.RegisterRaw("echo", func(_ context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
		return &channel.RawResponse{Arg3: req.Arg3}, nil
	})
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		panic(err)
	}

	client, err := channel.New("example-client")
	if err != nil {
		panic(err)
	}
	defer client.Close()
	kv, err := client.NewClient("kv", channel.WithResolver(discovery.StaticHostPorts(server.HostPort())))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	res, err := kv.CallRaw(ctx, "echo", nil, []byte("hello")) // waits for the resolver's first answer
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.Arg3), client.Debug().Services[0].Resolver.Status)
	// Output: hello OK
}

// A server leaving its fleet: Shutdown deregisters it (WithRegistrar),
// serves on while clients learn, declines new calls so that Sluice clients
// retry them elsewhere, waits for those in flight, and closes.
func ExampleChannel_Shutdown() {
	server, err := channel.New("kv", channel.WithShutdown(channel.ShutdownConfig{Quiet: 10 * time.Millisecond}))
	if err != nil {
		panic(err)
	}
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // Kubernetes' default grace period
	defer cancel()
	if err := server.Shutdown(ctx); err != nil {
		fmt.Println("shutdown:", err)
	}
	fmt.Println(server.Debug().Phase)
	// Output: CLOSED
}
