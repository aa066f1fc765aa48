package cli

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/internal/testkit/tpeer"
	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/sluice-rpc/sluice/tools/internal/testkit/testhttp"
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

// After calls to echo, fail and busy from a named caller, sluice serve's
// /metrics has the server's latency histogram labelled method and caller,
// its errors labelled code and method (BUSY, and fail's application
// error apart), and with --tchannel-metrics tchannel-go's inbound_calls_*.
func TestServeMetricsByMethodAndCaller(t *testing.T) {
	addr, stderr := startServeStderr(t, "--debug-listen", "127.0.0.1:0", "--tchannel-metrics")
	m := regexp.MustCompile(`sluice serve: debug endpoints on (http://\S+/) `).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("sluice serve did not say where its debug listener is:\n%s", stderr.String())
	}
	for method, wantExit := range map[string]int{"echo": 0, "fail": 1, "busy": 1} {
		var out, errOut bytes.Buffer
		if code := run([]string{"call", "-p", addr, "-s", "echo", "-m", method, "--caller", "someone", "-r", `{"a":1}`}, &out, &errOut); code != wantExit {
			t.Fatalf("sluice call -m %s: exit %d, want %d: %s", method, code, wantExit, errOut.String())
		}
	}
	wants := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^server_call_latency_bucket\{caller="someone",method="echo",service="echo",le="\+Inf"\} 1$`),
		regexp.MustCompile(`(?m)^server_call_errors\{caller="someone",code="BUSY",method="busy",service="echo"\} 1$`),
		regexp.MustCompile(`(?m)^server_call_app_errors\{caller="someone",method="fail",service="echo"\} 1$`),
		regexp.MustCompile(`(?m)^server_calls\{caller="someone",method="echo",service="echo"\} 1$`),
		regexp.MustCompile(`(?m)^inbound_calls_recvd\{calling_service="someone",endpoint="busy",service="echo"\} 1$`),
		regexp.MustCompile(`(?m)^inbound_calls_system_errors\{calling_service="someone",endpoint="busy",service="echo",type="busy"\} 1$`),
		regexp.MustCompile(`(?m)^inbound_calls_app_errors\{calling_service="someone",endpoint="fail",service="echo"\} 1$`),
		regexp.MustCompile(`(?m)^inbound_calls_success\{calling_service="someone",endpoint="echo",service="echo"\} 1$`),
		regexp.MustCompile(`(?m)^inbound_calls_latency_bucket\{calling_service="someone",endpoint="echo",service="echo",le="\+Inf"\} 1$`),
	}
	var (
		metrics string
		missing *regexp.Regexp
	)
	defer func() { // runs on the Fatal of a wait that timed out
		if t.Failed() && missing != nil {
			t.Errorf("/metrics has no line matching %s:\n%s", missing, metrics)
		}
	}()
	testwait.Until(t, "/metrics to report the calls", func() bool {
		metrics, missing = testhttp.OK(t, m[1]+"metrics"), nil
		for _, re := range wants {
			if !re.MatchString(metrics) {
				missing = re
				return false
			}
		}
		return true
	})
}

// --tchannel-metrics without --debug-listen would report to nowhere.
func TestServeTChannelMetricsNeedsDebugListen(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"serve", "--tchannel-metrics"}, &out, &errOut); code != ExitUsage || !strings.Contains(errOut.String(), "--debug-listen") {
		t.Fatalf("exit %d, stderr %q; want %d naming --debug-listen", code, errOut.String(), ExitUsage)
	}
}
