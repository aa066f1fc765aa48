package channel

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
	"github.com/uber/tchannel-go/raw"
)

// tchannel-go's own clients on Channel.TChannel() fail at once with
// ErrUseClient, not "no peers available"; an application that puts peers
// of its own in that channel's list calls them as before.
func TestTChannelClientsOnTheExposedChannel(t *testing.T) {
	c, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := startServer(t)
	if err := to(c, "kv").AddPeer(s.ch.HostPort()); err != nil {
		t.Fatal(err)
	}
	ctx := tjson.WithHeaders(ctxTimeout(t), nil)
	var res echoRes
	err = tjson.NewClient(c.TChannel(), "kv", nil).Call(ctx, "get", &echoReq{Key: "k"}, &res)
	if err == nil || !strings.Contains(err.Error(), ErrUseClient.Error()) {
		t.Errorf("json.NewClient on TChannel(): %v, want %v", err, ErrUseClient)
	}
	_, _, _, err = raw.CallSC(ctxTimeout(t), c.TChannel().GetSubChannel("kv"), "echo", nil, nil)
	if !errors.Is(err, ErrUseClient) {
		t.Errorf("raw.CallSC on TChannel(): %v, want ErrUseClient", err)
	}
	if s.received.Load() != 0 {
		t.Errorf("the server received %d requests, want none", s.received.Load())
	}

	// The application's own peer, in the exposed channel's list: its
	// calls reach it, as on a plain tchannel-go channel; a retry that has
	// tried it may choose the placeholder once, which then leaves.
	own := startServer(t)
	var busyNext atomic.Bool // the next raw request is answered Busy
	own.busyEvery = func() bool { return busyNext.CompareAndSwap(true, false) }
	c.TChannel().Peers().Add(own.ch.HostPort())
	for i := 0; i < 5; i++ {
		if _, _, _, err := raw.CallSC(ctxTimeout(t), c.TChannel().GetSubChannel("kv"), "echo", nil, []byte("x")); err != nil {
			t.Fatalf("raw.CallSC %d with a peer of the application's: %v", i, err)
		}
	}
	busyNext.Store(true)
	tries := 0
	err = c.TChannel().RunWithRetry(ctxTimeout(t), func(ctx context.Context, rs *tchannel.RequestState) error {
		tries++
		call, err := c.TChannel().GetSubChannel("kv").BeginCall(ctx, "echo", &tchannel.CallOptions{Format: tchannel.Raw, RequestState: rs})
		if err != nil {
			return err
		}
		_, _, _, err = raw.WriteArgs(call, nil, []byte("x"))
		return err
	})
	// Busy from the peer, the placeholder (which leaves), the peer again.
	if err != nil || tries != 3 {
		t.Fatalf("RunWithRetry: %v after %d tries, want success after 3", err, tries)
	}
	if _, ok := c.TChannel().Peers().Copy()[placeholderPeer]; ok {
		t.Errorf("the placeholder is still in the list: %v", c.TChannel().Peers().Copy())
	}
}
