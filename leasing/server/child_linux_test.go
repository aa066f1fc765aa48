package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// childServerEnv, set to "NOFILE MAXCONNS", makes the test binary a
// server instead (see TestMain): its descriptor limit lowered to NOFILE,
// serving with Config.MaxConns MAXCONNS on 127.0.0.1, its address printed
// on stdout, until stdin closes.
const childServerEnv = "SLUICE_DOORMAN_TEST_CHILD"

func runChildServer(spec string) int {
	var nofile uint64
	var maxConns int
	if _, err := fmt.Sscan(spec, &nofile, &maxConns); err != nil {
		fmt.Fprintln(os.Stderr, "child server:", err)
		return 2
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, "child server:", err)
		return 2
	}
	lim.Cur = nofile
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, "child server:", err)
		return 2
	}
	// A minute to handshake, so that only the cap frees descriptors.
	s, err := New(Config{Repository: starRepo(), MaxConns: maxConns, ConnectionTimeout: time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child server:", err)
		return 2
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "child server:", err)
		return 2
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	fmt.Println(lis.Addr())
	io.Copy(io.Discard, os.Stdin)
	s.Stop()
	<-done
	return 0
}

// startChildServer starts the test binary as a server (see
// childServerEnv) and returns its address; it stops when the test ends.
func startChildServer(t *testing.T, nofile, maxConns int) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d", childServerEnv, nofile, maxConns))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr, exited := make(chan string, 1), make(chan error, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		addr <- strings.TrimSpace(line)
		io.Copy(io.Discard, r)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close()
		if err := testwait.Recv(t, exited, "the child server to exit"); err != nil {
			t.Errorf("child server: %v\n%s", err, stderr.String())
		}
	})
	a := testwait.Recv(t, addr, "the child server's address")
	if a == "" {
		t.Fatalf("the child server printed no address\n%s", stderr.String())
	}
	return a
}

// With the process out of descriptors but for the cap, hundreds of
// sockets that connect and say nothing cannot keep a new client out: at
// Config.MaxConns each new connection closes the oldest silent one. The
// server runs in a process of its own, limited to 128 descriptors, so
// that without the cap the silent sockets exhaust them and the client's
// connection waits unaccepted.
func TestServeCapsConnections(t *testing.T) {
	t.Parallel() // waits on real time (refreshes, timers, a child process): overlaps with the other waiting tests
	addr := startChildServer(t, 128, 50)
	for range 200 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := dial(t, addr).GetCapacity(ctx, &pb.GetCapacityRequest{ClientId: proto.String("late"),
		Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(10)}}})
	if err != nil {
		t.Fatalf("a new client after 200 silent sockets: %v", err)
	}
	if got := resp.Response[0].GetGets().GetCapacity(); got != 10 {
		t.Fatalf("the new client got %v, want 10", got)
	}
}
