package faults

import (
	"bufio"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// The child process: it serves, reports its accepts and executions on its
// stdout, stops on SIGSTOP and answers again on SIGCONT, and dies on
// SIGKILL.
func TestChildServesReportsAndObeysSignals(t *testing.T) {
	if !canSignal {
		t.Skip("needs Unix signals")
	}
	var accepts, execs events
	c, err := startChild(&accepts, &execs)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.close(); err != nil {
			t.Error(err)
		}
	}()
	if got := callOnce(t, c.Addr, MethodEcho, testwait.Limit); got != "" {
		t.Fatalf("echo: %s", got)
	}
	testwait.Until(t, "the child's accept and execution reported", func() bool {
		return accepts.count() == 1 && execs.count() == 1
	})

	if err := c.freeze(); err != nil {
		t.Fatal(err)
	}
	if got := callOnce(t, c.Addr, MethodEcho, 200*time.Millisecond); got == "" {
		t.Errorf("echo to a frozen child: %q, want it to fail (TIMEOUT)", got)
	}
	if err := c.thaw(); err != nil {
		t.Fatal(err)
	}
	if got := callOnce(t, c.Addr, MethodEcho, testwait.Limit); got != "" {
		t.Errorf("echo after SIGCONT: %s", got)
	}

	if err := c.kill(); err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, c.Proc.Exited(), "the killed child's exit")
	if err := c.freeze(); err == nil {
		t.Error("signalling an exited child succeeded")
	}
}

// serveChild writes its address first and returns when its stdin ends.
func TestServeChildEndsWithItsStdin(t *testing.T) {
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- serveChild(stdinR, stdoutW)
		stdoutW.Close()
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdoutR)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	first := testwait.Recv(t, lines, "the child's first line")
	if !strings.HasPrefix(first, "listening "+loopback+":") {
		t.Fatalf("first line %q, want %q and an address on %s", first, "listening", loopback)
	}
	stdinW.Close()
	if code := testwait.Recv(t, done, "serveChild's return once stdin ended"); code != 0 {
		t.Errorf("serveChild returned %d, want 0", code)
	}
	for range lines { // drain until the pipe closes
	}
}

func TestServeChildIfAskedReturnsWhenNotAsked(t *testing.T) {
	if os.Getenv(ChildEnv) != "" {
		t.Skipf("%s is set in the test's environment", ChildEnv)
	}
	ServeChildIfAsked() // returns at once
}
