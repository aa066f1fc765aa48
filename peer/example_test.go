package peer_test

import (
	"errors"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/uber/tchannel-go"
)

// Peers an earlier attempt used are chosen last, and a peer whose limiter
// refuses is skipped.
func Example() {
	// A ceiling of one request per peer per second, to show throttling.
	l, err := peer.NewList(peer.ListConfig{Service: "kv", Busy: busy.Config{Ceiling: 1}})
	if err != nil {
		panic(err)
	}
	a, _ := l.Add("127.0.0.1:4001")
	l.Add("127.0.0.1:4002")

	p, _ := l.Choose([]*peer.Peer{a}) // a retry: avoid a
	fmt.Println("retry goes to", p.HostPort())
	p, _ = l.Choose(nil) // 4002 has spent its request this second
	fmt.Println("next goes to", p.HostPort())
	_, err = l.Choose(nil)
	fmt.Println(errors.Is(err, peer.ErrThrottled))
	// Output:
	// retry goes to 127.0.0.1:4002
	// next goes to 127.0.0.1:4001
	// true
}

// A Pool makes each peer's connection in the background; a List built on
// it chooses only peers whose connection is Ready. Here a plain tchannel-go
// server on 127.0.0.1 and a peer nobody listens on: one becomes Ready, the
// other goes into transient failure, and calls go to the Ready one.
func ExamplePool() {
	server, err := tchannel.NewChannel("kv", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer server.Close()
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // nothing listens there now

	pool, err := peer.NewPool(peer.PoolConfig{}) // the default connect timeout, backoff and health check
	if err != nil {
		log.Fatal(err)
	}
	// The pool's Dialer goes into the client channel's options: calls never
	// dial, the peers' connectors do.
	client, err := tchannel.NewChannel("kv-client", &tchannel.ChannelOptions{Dialer: pool.Dialer(nil)})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { pool.Close(); client.Close() }() // the connectors, then their connections
	if err := pool.Start(client); err != nil {
		log.Fatal(err)
	}
	list, err := peer.NewList(peer.ListConfig{Service: "kv", Pool: pool})
	if err != nil {
		log.Fatal(err)
	}
	live, _ := list.Add(server.PeerInfo().HostPort)
	gone, _ := list.Add(dead)

	// Wait, bounded, until both connectors have settled.
	timeout := time.After(10 * time.Second)
	for {
		changed := pool.Changed() // read before looking at the states
		if live.State() == peer.Ready && gone.State() == peer.TransientFailure {
			break
		}
		select {
		case <-changed:
		case <-timeout:
			log.Fatalf("states: %v, %v", live.State(), gone.State())
		}
	}
	fmt.Println("server:", live.State())
	fmt.Println("nobody listening:", gone.State())
	p, err := list.Choose(nil)
	fmt.Println("chosen:", p == live, err)
	// Output:
	// server: READY
	// nobody listening: TRANSIENT_FAILURE
	// chosen: true <nil>
}

// DefaultConnectBackoff is gRPC's connection backoff; r = 0.5 draws the
// middle of the +-20 % jitter, which is the ceiling itself.
func ExampleDefaultConnectBackoff() {
	b := peer.DefaultConnectBackoff()
	for n := 1; n <= 4; n++ {
		fmt.Print(b.Delay(n, 0.5), " ")
	}
	fmt.Println("...", b.Delay(20, 0.5))
	// Output:
	// 1s 1.6s 2.56s 4.096s ... 2m0s
}
