package channel

import (
	"context"
	"errors"
	"math"
	"net"

	"github.com/uber/tchannel-go"
)

// ErrUseClient is the error of a call made through tchannel-go's own
// clients on the *tchannel.Channel that TChannel returns, choosing its
// peer from that channel's peer list (Peers, shared by its sub-channels):
// tthrift.NewClient(ch.TChannel(), "svc", nil), json.NewClient without a
// HostPort, raw.CallSC. Such a call does not go through Sluice's pipeline,
// and the list has no peers: a Client's peers are its own. It fails at
// once (tchannel-go does not retry it), where it would fail with
// tchannel-go's "no peers available".
var ErrUseClient = errors.New("sluice: this call was made on Channel.TChannel()'s *tchannel.Channel, whose peer list is empty: " +
	"its calls bypass Sluice and a Client's peers are the Client's own; make the call on a channel.Client (Channel.NewClient): " +
	"package thrift's NewClient(cl) in place of tchannel-go's thrift.NewClient, cl.CallJSON in place of json.NewClient, cl.CallRaw in place of raw.Call")

// placeholderPeer is the host:port of the peer that stands in the peer list
// of a Channel's *tchannel.Channel (its Peers) while the application has
// put none there: tchannel-go's clients that choose from that list choose
// it, and the Channel's dialer answers their dial ErrUseClient (see
// placeholderDial). The name is in the .invalid domain, which resolves
// nowhere (RFC 6761). It shows in tchannel-go's introspection of the
// channel, with no connection.
const placeholderPeer = "use-a-sluice-client.invalid:0"

// errPlaceholderLeft is what a call that chose the placeholder gets once
// the application has added peers of its own to the list: a network
// error, which tchannel-go's RunWithRetry retries on another peer by
// default. The placeholder leaves the list then.
var errPlaceholderLeft net.Error = &placeholderLeft{}

type placeholderLeft struct{}

func (*placeholderLeft) Error() string {
	return "sluice: this call chose the placeholder peer of Channel.TChannel()'s peer list, which now holds peers of the application's own; it has left the list: try another peer"
}
func (*placeholderLeft) Timeout() bool   { return false }
func (*placeholderLeft) Temporary() bool { return true }

// placeholderDial wraps the Channel's dialer next: a dial of the
// placeholder fails with ErrUseClient while it is the only peer of tch()'s
// list. An application that adds peers of its own to that list (to call
// them through tchannel-go, outside Sluice) keeps tchannel-go's behaviour:
// the placeholder ranks below every other peer (placeholderLast), so only
// a retry that has tried them all chooses it; that dial removes it from
// the list and fails with a network error, which tchannel-go retries.
func placeholderDial(tch func() *tchannel.Channel, next func(ctx context.Context, network, hostPort string) (net.Conn, error)) func(ctx context.Context, network, hostPort string) (net.Conn, error) {
	return func(ctx context.Context, network, hostPort string) (net.Conn, error) {
		if hostPort != placeholderPeer {
			return next(ctx, network, hostPort)
		}
		if ch := tch(); ch != nil && len(ch.Peers().Copy()) > 1 {
			_ = ch.Peers().Remove(placeholderPeer)
			return nil, errPlaceholderLeft
		}
		return nil, ErrUseClient
	}
}

// addPlaceholder puts the placeholder peer in tch's peer list, ranked
// last.
func addPlaceholder(tch *tchannel.Channel) {
	tch.Peers().SetStrategy(placeholderLast{})
	tch.Peers().Add(placeholderPeer)
}

// placeholderLast is the peer choice of the list that holds the
// placeholder: tchannel-go's default (peers with an inbound connection
// first, then those with any connection, then the others; within each,
// the fewest calls pending), with the placeholder after all of them.
type placeholderLast struct{}

func (placeholderLast) GetScore(p *tchannel.Peer) uint64 {
	if p.HostPort() == placeholderPeer {
		return math.MaxUint64
	}
	in, out := p.NumConnections()
	pending := uint64(p.NumPendingOutbound())
	switch {
	case in+out == 0:
		return math.MaxUint64 - 1
	case in == 0:
		return math.MaxInt32 + pending
	}
	return pending
}
