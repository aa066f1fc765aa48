package load_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
)

func ExampleParseShape() {
	s, err := load.ParseShape("heavy-tail")
	if err != nil {
		panic(err)
	}
	fmt.Println(s)
	s, _ = load.ParseShape("2ms,0.01@1s")
	fmt.Println(s.FastMin, s.SlowFraction, s.SlowMin)
	// Output:
	// 500µs-1.5ms,0.03@100ms-200ms
	// 2ms 0.01 1s
}

// Three embedded servers answering in 1 ms, and 50 calls at 500/s through
// a Sluice channel.
func ExampleRun() {
	servers, err := load.StartServers(3, load.ServerConfig{Service: "kv", Method: "get", Shape: load.Fixed(time.Millisecond)})
	if err != nil {
		panic(err)
	}
	defer servers.Close()
	ch, err := channel.New("example")
	if err != nil {
		panic(err)
	}
	defer ch.Close()
	client, err := ch.NewClient("kv")
	if err != nil {
		panic(err)
	}
	for _, hp := range servers.HostPorts() {
		if err := client.AddPeer(hp); err != nil {
			panic(err)
		}
	}
	r, err := load.Run(context.Background(), client, load.Config{Method: "get", RPS: 500, Calls: 50})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Calls, r.OK, r.AttemptsPerCall, time.Duration(r.Latency.P50) >= time.Millisecond)
	// Output: 50 50 1 true
}
