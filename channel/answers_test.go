package channel

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// Calls whose answers are not yet written are bounded over the server
// (PeerLimits.MaxAnswerBytes): past it, a call is answered BUSY before its
// handler runs, and counted; once answers are written, calls pass again.
func TestMaxAnswerBytes(t *testing.T) {
	const bound = 1 << 20 // about 16 small calls: each is charged 64 KiB for its answer
	scope := tally.NewTestScope("", nil)
	server, err := New("kv", WithScope(scope), WithPeerLimits(PeerLimits{MaxAnswerBytes: bound}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(server.Close)
	var ran atomic.Int64
	release := make(chan struct{})
	if err := server.RegisterRaw("block", func(context.Context, *RawRequest) (*RawResponse, error) {
		ran.Add(1)
		<-release
		return &RawResponse{}, nil
	}); err != nil {
		t.Fatalf("RegisterRaw: %v", err)
	}
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	client := plainClient(t, nil)
	ctx := ctxTimeout(t)
	call := func() error {
		_, _, _, err := raw.Call(ctx, client, server.HostPort(), "kv", "block", nil, nil)
		return err
	}
	const calls = 20
	done := make(chan error, calls)
	for range calls {
		go func() { done <- call() }()
	}
	var refused []error
	testwait.Until(t, "every call in its handler or refused", func() bool {
		for {
			select {
			case err := <-done:
				refused = append(refused, err)
			default:
				return int(ran.Load())+len(refused) == calls
			}
		}
	})
	// A connection that reads its answers may go an eighth over the bound.
	if most := int64(bound+bound/8) / (64 << 10); len(refused) == 0 || ran.Load() > most {
		t.Fatalf("%d handlers ran and %d calls were refused, want at most %d to run", ran.Load(), len(refused), most)
	}
	msg := requireSystemError(t, refused[0], tchannel.ErrCodeBusy)
	if !strings.Contains(msg, "answers are waiting to be written") {
		t.Errorf("msg = %q, want it to say answers are waiting to be written", msg)
	}
	if got := taggedCounter(scope, stats.ServerRefused, stats.TagReason, "answer_bytes"); got != int64(len(refused)) {
		t.Errorf("answer_bytes refusals counted %d, want %d", got, len(refused))
	}
	close(release)
	for range int(ran.Load()) {
		if err := testwait.Recv(t, done, "an admitted call"); err != nil {
			t.Fatalf("an admitted call: %v", err)
		}
	}
	if err := call(); err != nil {
		t.Fatalf("a call once the answers were written: %v", err)
	}
}

// A MaxAnswerBytes that could admit no call is refused, naming the field
// and the least it may be; Off.MaxAnswerBytes turns the bound off.
func TestMaxAnswerBytesValidate(t *testing.T) {
	_, err := New("kv", WithPeerLimits(PeerLimits{MaxAnswerBytes: 1000}))
	if err == nil || !strings.Contains(err.Error(), "MaxAnswerBytes is 1000, below 131072") {
		t.Fatalf("New = %v, want an error naming MaxAnswerBytes and 131072", err)
	}
	ch, err := New("kv", WithPeerLimits(PeerLimits{Off: PeerLimitsOff{MaxAnswerBytes: true}}))
	if err != nil {
		t.Fatalf("New with the bound off: %v", err)
	}
	ch.Close()
}

// PeerLimits.MinReadRate reaches the listener, whose write-stall check
// judges a slow reader by it (internal/connlimit's tests).
func TestMinReadRateReachesTheListener(t *testing.T) {
	for _, rate := range []int64{0, 1 << 20} {
		if got := (PeerLimits{MinReadRate: rate}).listenerConfig().MinReadRate; got != rate {
			t.Errorf("MinReadRate %d: the listener got %d", rate, got)
		}
	}
	// Off.MinReadRate reaches it as the listener's "no pace", -1.
	if got := (PeerLimits{Off: PeerLimitsOff{MinReadRate: true}}).listenerConfig().MinReadRate; got != -1 {
		t.Errorf("Off.MinReadRate: the listener got %d, want -1", got)
	}
}
