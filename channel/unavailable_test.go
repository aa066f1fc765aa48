package channel

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/uber/tchannel-go"
)

// unavailableCall makes a client whose only peer of "kv" is at addr,
// waits until its connect has failed, and returns the error of a call.
func unavailableCall(t *testing.T, addr string, cc ConnectConfig) error {
	t.Helper()
	c, err := New("client", WithConnectConfig(cc))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv").AddPeer(addr); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	if err := to(c, "kv").Connect(ctxTimeout(t)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Connect error = %v, want %v", err, ErrUnavailable)
	}
	_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	var ce *CallError
	if !errors.As(err, &ce) || ce.Code != codes.Unavailable || ce.Attempts != 0 {
		t.Fatalf("CallRaw error = %v, want an UNAVAILABLE *CallError after 0 attempts", err)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("errors.Is(%v, ErrUnavailable) = false", err)
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("error %q does not name the peer %s", err, addr)
	}
	return err
}

// An UNAVAILABLE call to a peer that refuses connections says so, and
// unwraps to the dial's error.
func TestUnavailableKeepsRefusedCause(t *testing.T) {
	err := unavailableCall(t, testnet.Refused(t), ConnectConfig{})
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %q does not say connection refused", err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("errors.Is(%v, syscall.ECONNREFUSED) = false", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" {
		t.Errorf("errors.As(%v, *net.OpError) found %v, want the dial's error", err, oe)
	}
}

// An UNAVAILABLE call to a peer that accepts TCP connections and never
// answers TChannel's handshake says the handshake timed out. The cause is
// text: tchannel-go's timeout error is not in the chain, so the call's
// code is the only one errors.As finds.
func TestUnavailableKeepsHandshakeTimeoutCause(t *testing.T) {
	hole := testnet.BlackHole(t)
	err := unavailableCall(t, hole.Addr(), ConnectConfig{Timeout: 100 * time.Millisecond})
	if !strings.Contains(err.Error(), "handshake timed out after 100ms") {
		t.Errorf("error %q does not say the handshake timed out", err)
	}
	var se tchannel.SystemError
	if errors.As(err, &se) {
		t.Errorf("errors.As(%v, tchannel.SystemError) found code %v; want none: the call's code is UNAVAILABLE", err, se.Code())
	}
	if hole.Accepts() == 0 {
		t.Error("the black hole accepted no connection: the handshake never started")
	}
}
