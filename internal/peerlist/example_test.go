package peerlist_test

import (
	"errors"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/internal/peerlist"
	"github.com/sluice-rpc/sluice/internal/pool"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/uber/tchannel-go"
)

// Peers an earlier attempt used are chosen last, and a peer whose limiter
// refuses is skipped.
func Example() {
	// A ceiling of one request per peer per second, to show throttling.
	l, err := peerlist.New(peerlist.Config{Service: "kv", Busy: busy.Config{Ceiling: 1}})
	if err != nil {
		panic(err)
	}
	a, _ := l.Add("127.0.0.1:4001")
	l.Add("127.0.0.1:4002")

	p, _ := l.Choose([]*peerlist.Peer{a}) // a retry: avoid a
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

// A pool.Pool makes each peer's connection in the background; a List built on
// it chooses only peers whose connection is Ready. Here a plain tchannel-go
// server on 127.0.0.1 and a peer nobody listens on: one becomes Ready, the
// other goes into transient failure, and calls go to the Ready one.
func Example_pool() {
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

	connections, err := pool.New(pool.Config{}) // the default connect timeout, backoff and health check
	if err != nil {
		log.Fatal(err)
	}
	// The pool's Dialer goes into the client channel's options: calls never
	// dial, the peers' connectors do.
	client, err := tchannel.NewChannel("kv-client", &tchannel.ChannelOptions{Dialer: connections.Dialer(nil)})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { connections.Close(); client.Close() }() // the connectors, then their connections
	if err := connections.Start(client); err != nil {
		log.Fatal(err)
	}
	list, err := peerlist.New(peerlist.Config{Service: "kv", Pool: connections})
	if err != nil {
		log.Fatal(err)
	}
	live, _ := list.Add(server.PeerInfo().HostPort)
	gone, _ := list.Add(dead)

	// Wait, bounded, until both connectors have settled.
	timeout := time.After(10 * time.Second)
	for {
		changed := connections.Changed() // read before looking at the states
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
