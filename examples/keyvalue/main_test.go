package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs three instances on free ports, the first busy ones answering
// Busy, and returns their addresses as -peers wants them.
func start(t *testing.T, busy int) string {
	t.Helper()
	chs, err := startServers([]string{"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"}, busy, 0)
	if err != nil {
		t.Fatalf("startServers: %v", err)
	}
	t.Cleanup(func() { closeAll(chs) })
	var addrs []string
	for _, ch := range chs {
		addrs = append(addrs, ch.HostPort())
	}
	return strings.Join(addrs, ",")
}

func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, args, &out)
	return out.String(), err
}

func TestServiceConfigFileIsValid(t *testing.T) {
	cfg, err := loadConfig("serviceconfig.json")
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	mc, ok := cfg.Lookup(service, "KeyValue::Get")
	if !ok {
		t.Fatal("the config names no policy for keyvalue's methods")
	}
	if mc.Retry == nil {
		t.Fatal("mc.Retry is nil")
	}
	if cfg.RetryThrottling == nil {
		t.Fatal("cfg.RetryThrottling is nil")
	}
}

func TestSetThenGet(t *testing.T) {
	peers := start(t, 0)
	out, err := runCmd(t, "set", "-peers", peers, "fruit", "apple")
	if err != nil {
		t.Fatalf("runCmd: %v", err)
	}
	if re := regexp.MustCompile(`^fruit set \(served by 127\.0\.0\.1:\d+ on attempt 1\)\n$`); !re.MatchString(out) {
		t.Errorf("out = %q, want a match for %q", out, re)
	}

	out, err = runCmd(t, "get", "-peers", peers, "fruit")
	if err != nil {
		t.Fatalf("runCmd: %v", err)
	}
	if re := regexp.MustCompile(`^fruit = "apple" \(served by 127\.0\.0\.1:\d+ on attempt 1\)\n$`); !re.MatchString(out) {
		t.Errorf("out = %q, want a match for %q", out, re)
	}

	_, err = runCmd(t, "get", "-peers", peers, "veg")
	if err == nil || err.Error() != `key "veg" not found` {
		t.Fatalf("runCmd error = %v, want %q", err, `key "veg" not found`)
	}
	_, err = runCmd(t, "set", "-peers", peers, "1x", "y")
	if want := "invalid key: a key must start with a letter"; err == nil || err.Error() != want {
		t.Fatalf("runCmd error = %v, want %q", err, want)
	}
}

// With one of three instances answering Busy, calls that tried it first are
// retried on another instance and succeed, as the service config says.
func TestLoadRetriesBusyInstance(t *testing.T) {
	peers := start(t, 1)
	busyPeer := strings.Split(peers, ",")[0]
	out, err := runCmd(t, "load", "-peers", peers, "-n", "30")
	if err != nil {
		t.Fatalf("runCmd: %v", err)
	}
	t.Log("\n" + out)

	m := regexp.MustCompile(`^30 calls: (\d+) ok \((\d+) after a retry\), (\d+) failed\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary line in the output:\n%s", out)
	}
	ok, retried, failed := atoi(t, m[1]), atoi(t, m[2]), atoi(t, m[3])
	if ok+failed != 30 {
		t.Errorf("ok+failed = %v, want %v", ok+failed, 30)
	}
	if retried <= 0 {
		t.Errorf("no call was retried after Busy: got %v, want > %v", retried, 0)
	}
	if failed > 0 { // retry throttling ran out of tokens: those fail Busy
		if want := "failed BUSY: " + strconv.Itoa(failed); !strings.Contains(out, want) {
			t.Errorf("out = %q, want it to contain %q", out, want)
		}
	}
	if re := regexp.MustCompile(`peer ` + regexp.QuoteMeta(busyPeer) + `: sent \d+, busy [1-9]`); !re.MatchString(out) {
		t.Errorf("out = %q, want a match for %q", out, re)
	}
}

// Without a service config nothing is retried: a Busy answer is the result.
func TestNoConfigNoRetries(t *testing.T) {
	peers := start(t, 3)
	_, err := runCmd(t, "get", "-peers", peers, "-config", "", "k")
	var ce *channel.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("runCmd error = %v, want a %T", err, ce)
	}
	if ce.Attempts != 1 {
		t.Errorf("ce.Attempts = %v, want %v", ce.Attempts, 1)
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage"},
		{[]string{"fly"}, `unknown command "fly"`},
		{[]string{"get"}, "get takes 1 argument(s), got 0"},
		{[]string{"get", "-peers", "", "k"}, "no peers"},
		{[]string{"get", "-config", "missing.json", "k"}, "service config"},
		{[]string{"serve", "-busy", "4"}, "-busy is 4, must be in 0..3"},
		{[]string{"serve", "extra"}, "serve takes no arguments"},
		{[]string{"load", "-n", "0", "-peers", "127.0.0.1:1"}, "-n is 0"},
	} {
		_, err := runCmd(t, tc.args...)
		if err == nil {
			t.Fatalf("%q: runCmd succeeded, want an error", tc.args)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %q, want it to contain %q", tc.args, err.Error(), tc.want)
		}
	}
}

func TestBadConfigIsRejected(t *testing.T) {
	path := t.TempDir() + "/bad.json"
	if err := os.WriteFile(path, []byte(`{"methodConfig":[{"name":[{"service":"keyvalue"}],"retryPolicy":{"maxAttempts":1,"initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["BUSY"]}}]}`), 0o600); err != nil {
		t.Fatalf("os.WriteFile: %v", err)
	}
	_, err := runCmd(t, "get", "-config", path, "k")
	if err == nil {
		t.Fatal("runCmd succeeded, want an error")
	}
	if !strings.Contains(err.Error(), "maxAttempts") {
		t.Errorf("err.Error() = %q, want it to contain %q", err.Error(), "maxAttempts")
	}
}

// serve runs until its context ends, then closes its instances.
func TestServeStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, []string{"-listen", "127.0.0.1:0,127.0.0.1:0", "-busy", "1"}, w) }()
	// serve prints one line per instance once all listen.
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if got := testwait.Recv(t, lines, "serve's first line"); !strings.Contains(got, "answering Busy") {
		t.Errorf("got %q, want it to contain %q", got, "answering Busy")
	}
	if got := testwait.Recv(t, lines, "serve's second line"); !strings.Contains(got, ": serving") {
		t.Errorf("got %q, want it to contain %q", got, ": serving")
	}
	cancel()
	if err := testwait.Recv(t, done, "serve to return"); err != nil {
		t.Fatalf("testwait.Recv: %v", err)
	}
	w.Close() // ends the scanner
	for range lines {
	}
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("strconv.Atoi: %v", err)
	}
	return n
}
