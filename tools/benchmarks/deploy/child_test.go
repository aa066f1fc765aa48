package deploy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uber/tchannel-go"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/tools/internal/fleet"
)

// childLines runs serveChild in this process on pipes and returns its
// output lines, the writer of its input and its exit code's channel.
func childLines(t *testing.T, j job) (<-chan string, io.WriteCloser, <-chan int) {
	t.Helper()
	spec := fmt.Sprintf(`{"server":%q,"listen":%q,"service_time":%d,"grace":%d,"quiet":%d}`,
		j.Server, j.Listen, j.ServiceTime, j.Grace, j.Quiet)
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	code := make(chan int, 1)
	go func() {
		code <- serveChild(spec, stdinR, stdoutW)
		stdoutW.Close()
	}()
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdoutR)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines, stdinW, code
}

// Each kind of server says where it listens, reports its first request,
// and says it is done when asked to leave: a Sluice one with Shutdown
// (declining nothing here: no request comes during its quiet time), a
// plain one with Close, saying it has no Shutdown when asked for one.
func TestServeChild(t *testing.T) {
	for _, tc := range []struct {
		server, leave, says string
	}{{serverSluice, cmdShutdown, ""}, {serverSluice, cmdClose, ""}, {serverTChannel, cmdClose, ""},
		{serverTChannel, cmdShutdown, "a plain tchannel-go server has no Shutdown"}} {
		t.Run(tc.server+"/"+tc.leave, func(t *testing.T) {
			lines, stdin, code := childLines(t, job{Server: tc.server, Listen: "127.0.0.1:0", ServiceTime: time.Millisecond,
				Grace: time.Second, Quiet: 20 * time.Millisecond})
			f := strings.Fields(testwait.Recv(t, lines, "the listening line"))
			if len(f) != 3 || f[0] != fleet.Listening || !strings.HasPrefix(f[1], "127.0.0.1:") {
				t.Fatalf("first line %q, want listening 127.0.0.1:PORT TIME", f)
			}
			client, err := tchannel.NewChannel("test-client", &tchannel.ChannelOptions{Logger: tchannel.NullLogger})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			client.Peers().Add(f[1])
			call := tchannelCaller(client)
			for range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
				_, err := call(ctx)
				cancel()
				if err != nil {
					t.Fatalf("echo: %v", err)
				}
			}
			if l := testwait.Recv(t, lines, "the first request's line"); !strings.HasPrefix(l, lineFirst+" ") {
				t.Fatalf("line %q, want %s TIME", l, lineFirst)
			}
			if _, err := io.WriteString(stdin, tc.leave+"\n"); err != nil {
				t.Fatal(err)
			}
			if l := strings.SplitN(testwait.Recv(t, lines, "the done line"), " ", 4); len(l) < 3 || l[0] != lineDone || l[2] != "3" ||
				strings.Join(l[3:], "") != tc.says {
				t.Fatalf("line %q, want done TIME 3 %s", l, tc.says)
			}
			if c := testwait.Recv(t, code, "serveChild's return"); c != 0 {
				t.Errorf("serveChild returned %d, want 0", c)
			}
			stdin.Close()
		})
	}
}

// A server that cannot serve says why and returns 1.
func TestServeChildFails(t *testing.T) {
	for _, tc := range []struct {
		spec, want string
	}{
		{`{`, ChildEnv},
		{`{"server":"grpc","listen":"127.0.0.1:0"}`, `job.Server is "grpc"`},
	} {
		var out strings.Builder
		if code := serveChild(tc.spec, strings.NewReader(""), &out); code != 1 || !strings.HasPrefix(out.String(), fleet.Error+" ") ||
			!strings.Contains(out.String(), tc.want) {
			t.Errorf("serveChild(%s) = %d, %q; want 1 and an error line naming %q", tc.spec, code, out.String(), tc.want)
		}
	}
}

func TestServeChildIfAskedReturnsWhenNotAsked(t *testing.T) {
	if os.Getenv(ChildEnv) != "" {
		t.Skipf("%s is set in the test's environment", ChildEnv)
	}
	ServeChildIfAsked() // returns at once
}

// listenRetrying gives up on a port in use once its limit has passed.
func TestListenRetryingGivesUp(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := listenRetrying(held.Addr().String(), 20*time.Millisecond); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("listen on a held port: %v, want EADDRINUSE after the limit", err)
	}
}

func TestCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{tchannel.NewSystemError(tchannel.ErrCodeDeclined, "closing"), "DECLINED"},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), "TIMEOUT"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, "NETWORK"},
		{errors.New("odd"), "UNEXPECTED"},
	} {
		if got := tchannelCode(tc.err); got != tc.want {
			t.Errorf("tchannelCode(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{&channel.CallError{Code: codes.Busy, Attempts: 1}, "BUSY"},
		{&channel.CallError{Code: codes.Unavailable}, "UNAVAILABLE"},
		{context.DeadlineExceeded, "TIMEOUT"},
		{errors.New("odd"), "LOCAL"},
	} {
		if got := sluiceCode(tc.err); got != tc.want {
			t.Errorf("sluiceCode(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
