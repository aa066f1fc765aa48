package peerlist

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/pool"
	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/uber/tchannel-go"
)

// A peer in TransientFailure says why: the dial's error for a refused
// connect (errors.Is finds syscall.ECONNREFUSED), a handshake that timed
// out or failed for a peer that accepted TCP. Before any failure it says
// nothing.
func TestLastFailureSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		addr    func(t *testing.T) string
		want    string
		refused bool
		dial    func(ctx context.Context, network, hostPort string) (net.Conn, error)
	}{
		{"refused", func(t *testing.T) string { return testnet.Refused(t) }, "connection refused", true, nil},
		{"black hole", func(t *testing.T) string { return testnet.BlackHole(t).Addr() }, "TChannel handshake timed out after 100ms", false, nil},
		{"accept then close", func(t *testing.T) string { return testnet.AcceptClose(t).Addr() }, "TChannel handshake failed", false, nil},
		// A SYN nobody answers: the dial runs out its time. tchannel-go
		// turns that into its TIMEOUT error, which must not show through
		// as the code of the calls that fail for want of the connection.
		{"dial timeout", func(t *testing.T) string { return testnet.Refused(t) }, "TCP dial timed out after 100ms", false,
			func(ctx context.Context, network, hostPort string) (net.Conn, error) {
				<-ctx.Done()
				return nil, &net.OpError{Op: "dial", Net: network, Err: os.ErrDeadlineExceeded}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Dials wait for the gate: a peer starts connecting once added,
			// and a refused dial could fail before the first look.
			gate := make(chan struct{})
			dial := tc.dial
			if dial == nil {
				var d net.Dialer
				dial = d.DialContext
			}
			gated := func(ctx context.Context, network, hostPort string) (net.Conn, error) {
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return dial(ctx, network, hostPort)
			}
			f := newFixture(t, pool.ConnectConfig{Timeout: 100 * time.Millisecond}, tchannel.ChannelOptions{Dialer: gated})
			p := f.add(tc.addr(t))
			if got := p.LastFailure(); got != nil {
				t.Fatalf("LastFailure before any connect = %v, want nil", got)
			}
			close(gate)
			f.list.Connect()
			f.waitState(p, peer.TransientFailure)
			got := p.LastFailure()
			if got == nil {
				t.Fatal("LastFailure = nil in TransientFailure")
			}
			if !strings.Contains(got.Err.Error(), tc.want) {
				t.Errorf("LastFailure().Err = %q, want it to say %q", got.Err, tc.want)
			}
			var se tchannel.SystemError
			if errors.As(got.Err, &se) {
				t.Errorf("LastFailure().Err = %v holds tchannel-go's %v: its code is not the calls'", got.Err, se.Code())
			}
			if errors.Is(got.Err, syscall.ECONNREFUSED) != tc.refused {
				t.Errorf("errors.Is(%v, ECONNREFUSED) = %v, want %v", got.Err, !tc.refused, tc.refused)
			}
			if !got.At.Equal(f.clk.Now()) {
				t.Errorf("LastFailure().At = %v, want the pool's clock, %v", got.At, f.clk.Now())
			}
		})
	}
}
