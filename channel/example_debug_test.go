package channel_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/channel"
)

// Debug shows what the client knows of each service it calls: here one
// peer, connected, that took one call and is not throttled. DebugHandler
// serves the same as JSON on a debug listener:
//
//	mux.Handle("/debug/sluice", client.DebugHandler())
func ExampleChannel_Debug() {
	server, err := channel.New("kv")
	if err != nil {
		panic(err)
	}
	defer server.Close()
	server.RegisterRaw("echo", func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
		return &channel.RawResponse{Arg3: req.Arg3}, nil
	})
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		panic(err)
	}

	client, err := channel.New("client")
	if err != nil {
		panic(err)
	}
	defer client.Close()
	kv, err := client.NewClient("kv")
	if err != nil {
		panic(err)
	}
	if err := kv.AddPeer(server.HostPort()); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := kv.CallRaw(ctx, "echo", nil, []byte("hello")); err != nil {
		panic(err)
	}

	for _, s := range client.Debug().Services {
		fmt.Printf("service %s: %d peer(s), methods called: %d\n", s.Name, len(s.Peers), len(s.Methods))
		for _, p := range s.Peers {
			fmt.Printf("  %s sent=%d pending=%d busy=%d throttled=%v\n",
				p.State, p.Sent, p.Pending, p.Busy, p.Limit < p.Ceiling)
		}
	}
	// Output:
	// service kv: 1 peer(s), methods called: 1
	//   READY sent=1 pending=0 busy=0 throttled=false
}
