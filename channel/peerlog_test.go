package channel

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/slogtest"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/internal/testkit/tpeer"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
)

// badPeers sends the server s n connections that each break the protocol
// (the checksum frame), and waits until the server has counted them all.
func badPeers(t *testing.T, s *testServer, scope tally.TestScope, n int) {
	t.Helper()
	before := taggedCounter(scope, stats.FramesInvalid, stats.TagDirection, "inbound")
	for i := 0; i < n; i++ {
		p := tpeer.Dial(t, s.ch.HostPort())
		p.Handshake()
		p.Send(checksumFrame(2))
		p.ClosedByServer()
	}
	testwait.Until(t, fmt.Sprintf("%d invalid frames counted", n), func() bool {
		return taggedCounter(scope, stats.FramesInvalid, stats.TagDirection, "inbound") == before+int64(n)
	})
}

// peerLines returns the warnings of logs about a peer breaking the
// protocol.
func peerLines(logs logRecorder) []string {
	var out []string
	for _, l := range logs.warnings() {
		if strings.HasPrefix(l, "sluice: a peer broke the protocol or a limit ") {
			out = append(out, l)
		}
	}
	return out
}

// A flood of bad peers gives peerLogBurst lines on the Channel's logger,
// however many there are, and the next line once the rate allows says
// how many were left out.
func TestPeerWarningsAreRateLimited(t *testing.T) {
	const flood = 40
	scope := tally.NewTestScope("", nil)
	logs := newLogRecorder()
	clk := &fakeNow{}
	s := startServer(t, WithScope(scope), WithLogger(logs.logger()), withLogClock(clk.now))
	badPeers(t, s, scope, flood)
	if got := peerLines(logs); len(got) != peerLogBurst {
		t.Fatalf("%d bad peers made %d lines, want %d (peerLogBurst): %q", flood, len(got), peerLogBurst, got)
	}
	clk.add(time.Second)
	badPeers(t, s, scope, 1)
	got := peerLines(logs)
	if len(got) != peerLogBurst+1 {
		t.Fatalf("a second later: %d lines, want %d: %q", len(got), peerLogBurst+1, got)
	}
	if want := fmt.Sprintf("suppressedBefore=%d ", flood-peerLogBurst); !strings.Contains(got[peerLogBurst], want) {
		t.Errorf("the line after the flood is %q, want it to contain %q", got[peerLogBurst], want)
	}
}

// A Channel given no logger writes its warnings about peers on
// slog.Default(), at Warn.
func TestPeerWarningsGoToSlogDefault(t *testing.T) {
	logs := newLogRecorder()
	prev := slog.Default()
	slog.SetDefault(logs.logger())
	defer slog.SetDefault(prev)
	scope := tally.NewTestScope("", nil)
	s := startServer(t, WithScope(scope))
	badPeers(t, s, scope, 1)
	got := peerLines(logs)
	if len(got) != 1 || !strings.Contains(got[0], "remotePeer=127.0.0.1:") || !strings.Contains(got[0], "checksum type is 4") {
		t.Errorf("slog.Default()'s lines: %q, want one naming the peer and the checksum", got)
	}
}

// The logger may be any slog.Handler, with attributes and groups of its
// own, as zapslog's (go.uber.org/zap/exp/zapslog) is: the Channel's lines
// come through it with the handler's attributes and group.
func TestPeerWarningsThroughAHandlersGroups(t *testing.T) {
	logs := newLogRecorder()
	scope := tally.NewTestScope("", nil)
	s := startServer(t, WithScope(scope), WithLogger(logs.logger().With("app", "kv").WithGroup("sluice")))
	badPeers(t, s, scope, 1)
	got := peerLines(logs)
	if len(got) != 1 || !strings.Contains(got[0], "app=kv sluice.remotePeer=127.0.0.1:") || !strings.Contains(got[0], "sluice.event=") {
		t.Errorf("lines: %q, want one with app=kv and the Channel's attributes in the group sluice", got)
	}
}

// Routine closes (a socket that connects and leaves, as TCP health checks
// do) are logged at Debug only: nothing at Warn, a line when the logger
// asks for Debug.
func TestRoutineClosesAreDebugOnly(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  int
	}{{slog.LevelWarn, 0}, {slog.LevelDebug, 1}} {
		scope := tally.NewTestScope("", nil)
		lines := &slogtest.Lines{Floor: tc.level}
		s := startServer(t, WithScope(scope), WithLogger(slog.New(lines)))
		c, err := net.Dial("tcp", s.ch.HostPort())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		// The line is written after the close is counted.
		testwait.Until(t, "the close to be counted (and logged, at Debug)", func() bool {
			return taggedCounter(scope, stats.ServerConnsClosed, stats.TagReason, "handshake_failed") == 1 &&
				lines.CountPrefix("DEBUG sluice: closed an inbound connection") >= tc.want
		})
		if got := lines.CountPrefix("DEBUG sluice: closed an inbound connection"); got != tc.want {
			t.Errorf("logger at %v: %d Debug lines for a socket that left, want %d", tc.level, got, tc.want)
		}
	}
}
