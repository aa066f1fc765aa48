package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/internal/testkit/tpeer"
	"github.com/sluice-rpc/sluice/internal/tframe"
)

// A peer that sends the frame that crashes plain tchannel-go is named on
// sluice serve's stderr, and the server serves on.
func TestServeNamesABadPeer(t *testing.T) {
	addr, stderr := startServeStderr(t, "--max-conns", "100")
	p := tpeer.Dial(t, addr)
	p.Handshake()
	p.Send(tframe.AppendCallReq(nil, 2, tframe.Call{TTL: 1000, Service: "echo",
		Fragment: tframe.Fragment{ChecksumType: 4, Chunks: [][]byte{[]byte("echo"), nil, nil}}}))
	p.ClosedByServer()
	testwait.Until(t, "a line naming the peer on stderr", func() bool {
		return strings.Contains(stderr.String(), "remotePeer="+p.LocalAddr().String())
	})
	line := stderr.String()
	for _, want := range []string{"invalid_frame", "checksum type is 4"} {
		if !strings.Contains(line, want) {
			t.Errorf("stderr %q does not say %q", line, want)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"call", "-p", addr, "-s", "echo", "-m", "echo", "-r", `{"a":1}`}, &out, &errOut); code != 0 {
		t.Fatalf("sluice call after the bad peer: exit %d: %s", code, errOut.String())
	}
}

func TestServeRejectsBadLimits(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"serve", "--handshake-timeout", "-1s"}, &out, &errOut); code != ExitUsage {
		t.Fatalf("exit %d, want %d: %s", code, ExitUsage, errOut.String())
	}
	if !strings.Contains(errOut.String(), "HandshakeTimeout") {
		t.Fatalf("stderr %q does not name the limit", errOut.String())
	}
}
