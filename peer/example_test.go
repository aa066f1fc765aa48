package peer_test

import (
	"errors"
	"fmt"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/peer"
)

// Peers an earlier attempt used are chosen last, and a peer whose limiter
// refuses is skipped.
func Example() {
	cfg := busy.DefaultConfig()
	cfg.Ceiling = 1 // one request per peer per second, to show throttling
	l, err := peer.NewList("kv", cfg, nil, nil, nil)
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
