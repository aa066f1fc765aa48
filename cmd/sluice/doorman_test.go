package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluice-rpc/sluice/internal/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "doorman.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

const testDoormanConfig = `
resources:
- identifier_glob: "db"
  capacity: 100
  algorithm:
    kind: FAIR_SHARE
    lease_length: 60
    refresh_interval: 15
    learning_mode_duration: 0
`

func TestDoormanServeAndGet(t *testing.T) {
	file := writeConfig(t, testDoormanConfig)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- doormanRun(ctx, []string{"serve", "--config", file, "--listen", "127.0.0.1:0", "--debug-listen", "127.0.0.1:0"}, &out, &errOut)
	}()
	re := regexp.MustCompile(`serving 1 templates on (\S+)`)
	debugRe := regexp.MustCompile(`(?m)^sluice doorman serve: debug endpoints on http://(\S+)/ \(/metrics /debug/pprof/ /status\)$`)
	var addr, debugAddr string
	testwait.Until(t, "serve to say where it listens", func() bool {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		}
		if m := debugRe.FindStringSubmatch(errOut.String()); m != nil {
			debugAddr = m[1]
		}
		return addr != "" && debugAddr != ""
	})

	var getOut, getErr bytes.Buffer
	code := doormanCmd([]string{"get", "--server", addr, "--resource", "db", "--wants", "30", "--client-id", "cli"}, &getOut, &getErr)
	if code != 0 {
		t.Fatalf("get exited %d: %s", code, getErr.String())
	}
	if got := getOut.String(); !strings.Contains(got, "client=cli resource=db wants=30 capacity=30") {
		t.Fatalf("get printed %q", got)
	}

	// The status page and the server's metrics share the debug listener.
	if page := httpGet(t, "http://"+debugAddr+"/status"); !strings.Contains(page, `resource "db"`) {
		t.Errorf("/status:\n%s", page)
	}
	answered := regexp.MustCompile(`(?m)^lease_requests [1-9]`)
	testwait.Until(t, "/metrics to count the request the server answered", func() bool {
		return answered.MatchString(httpGet(t, "http://"+debugAddr+"/metrics"))
	})

	// get released its lease on exit, so a watcher gets it all; --watch
	// prints each lease and ends with its context.
	wctx, wcancel := context.WithCancel(context.Background())
	var watchOut syncBuffer
	wexit := make(chan int, 1)
	go func() {
		wexit <- doormanRun(wctx, []string{"get", "--server", addr, "--resource", "db", "--wants", "200", "--client-id", "watcher", "--watch"}, &watchOut, &getErr)
	}()
	testwait.Until(t, "the watcher to print capacity=100", func() bool { return strings.Contains(watchOut.String(), "capacity=100") })
	wcancel()
	if code := testwait.Recv(t, wexit, "get --watch to exit"); code != 0 {
		t.Fatalf("get --watch exited %d", code)
	}

	cancel()
	if code := testwait.Recv(t, exit, "serve to exit"); code != 0 {
		t.Fatalf("serve exited %d: %s", code, errOut.String())
	}
}

func TestDoormanErrors(t *testing.T) {
	bad := writeConfig(t, `
resources:
- identifier_glob: "*"
  capacity: 1
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15}
- identifier_glob: "x"
  capacity: 1
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15}
`)
	tests := []struct {
		args    []string
		code    int
		message string
	}{
		{nil, 2, "sluice doorman: missing command"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--status", "127.0.0.1:0"}, 2, "flag provided but not defined: -status"},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0", "--debug-listen", "nope"}, 2, `--debug-listen "nope"`},
		{[]string{"serve"}, 2, "--config and --listen are required"},
		{[]string{"serve", "--config", bad, "--listen", "127.0.0.1:0"}, 1, `template 0 ("*")`},
		{[]string{"serve", "--config", "/nonexistent.yaml", "--listen", "127.0.0.1:0"}, 1, "reading configuration"},
		{[]string{"get", "--server", "127.0.0.1:1"}, 2, "--wants (>= 0) are required"},
		{[]string{"get", "--server", "127.0.0.1:1", "--resource", "r", "--wants", "1"}, 1, "sluice doorman get:"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := doormanRun(context.Background(), tt.args, &out, &errOut)
		if code != tt.code || !strings.Contains(errOut.String(), tt.message) {
			t.Errorf("doorman %v: exit %d, stderr %q; want exit %d and %q", tt.args, code, errOut.String(), tt.code, tt.message)
		}
	}
}
