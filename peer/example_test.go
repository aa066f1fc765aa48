package peer_test

import (
	"fmt"

	"github.com/sluice-rpc/sluice/peer"
)

// A peer's State prints as gRPC spells the connectivity states, and
// ValidateHostPort says what is wrong with an address before it is used.
func Example() {
	fmt.Println(peer.Ready, peer.TransientFailure)
	fmt.Println(peer.ValidateHostPort("127.0.0.1:4040"))
	fmt.Println(peer.ValidateHostPort("999.999.999.999:80") != nil)
	// Output:
	// READY TRANSIENT_FAILURE
	// <nil>
	// true
}
