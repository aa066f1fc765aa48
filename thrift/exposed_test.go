package thrift

import (
	"errors"
	"testing"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	tthrift "github.com/uber/tchannel-go/thrift"
)

// tchannel-go's Thrift client on the *tchannel.Channel a Sluice Channel
// exposes fails at once with channel.ErrUseClient, which names what to use.
func TestTChannelThriftClientOnExposedChannel(t *testing.T) {
	s, _ := startServer(t)
	ch, err := channel.New("kv-client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	kvc, err := ch.NewClient(service)
	if err != nil {
		t.Fatal(err)
	}
	if err := kvc.AddPeer(s.hostPort); err != nil {
		t.Fatal(err)
	}
	kv := keyvalue.NewTChanKeyValueClient(tthrift.NewClient(ch.TChannel(), service, nil))
	// Had it waited for a peer, it would end with the context's deadline.
	if _, err := kv.HealthCheck(ctxTimeout(t, nil)); !errors.Is(err, channel.ErrUseClient) {
		t.Fatalf("HealthCheck through tthrift.NewClient(ch.TChannel()): %v, want channel.ErrUseClient", err)
	}
	if s.received.Load() != 0 {
		t.Errorf("the server received %d calls, want none", s.received.Load())
	}
}
