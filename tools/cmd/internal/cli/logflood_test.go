package cli

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/internal/tframe"
)

// Hundreds of connections a TLS-only sluice serve refuses (a broken TLS
// handshake, a plaintext init) make a few lines on its stderr, not one
// each: at most the burst and rate of a Channel's lines about peers over
// the attack.
func TestServeLogIsRateLimited(t *testing.T) {
	t.Parallel()
	certs := testcerts.New(t)
	addr, stderr := startServeStderr(t, serveTLSArgs(certs)...)
	const conns = 300
	start := time.Now()
	attack := func(first []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(testwait.Limit))
		if _, err := c.Write(first); err != nil {
			return // refused already
		}
		io.Copy(io.Discard, c) // until the server closes it
	}
	for range conns {
		attack([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 'h', 'e', 'l', 'l', 'o'}) // a TLS record no handshake starts with
		attack(tframe.AppendInit(nil, tframe.InitReq, 1, tframe.Init{Version: 2}))
	}
	testwait.Until(t, "a refusal on stderr", func() bool { return strings.Contains(stderr.String(), "sluice: refused") })
	elapsed := time.Since(start)
	lines := strings.Count(stderr.String(), "\n")
	t.Logf("%d refused connections in %v: %d lines on stderr", 2*conns, elapsed.Round(time.Millisecond), lines)
	if bound := channel.LogBurst + channel.LogLinesPerSecond*int(elapsed/time.Second+1); lines > bound {
		t.Errorf("%d refused connections in %v wrote %d lines on stderr, want at most %d:\n%s", 2*conns, elapsed.Round(time.Millisecond), lines, bound, stderr.String())
	}
}
