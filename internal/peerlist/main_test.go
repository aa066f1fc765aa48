package peerlist

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Begin counts an attempt sent to the peer, Claim and Sent in one, as the
// channel does for an attempt that goes out: the tests' way to give a
// peer calls pending. End ends it.
func (p *Peer) Begin() {
	p.Claim()
	p.Sent()
}
