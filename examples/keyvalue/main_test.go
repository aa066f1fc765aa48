package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs three instances on free ports, the first busy ones answering
// Busy, and returns their addresses as -peers wants them.
func start(t *testing.T, busy int) string {
	t.Helper()
	chs, err := startServers([]string{"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"}, busy, 0)
	require.NoError(t, err)
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
	require.NoError(t, err)
	mc, ok := cfg.Lookup(service, "KeyValue::Get")
	require.True(t, ok, "the config names no policy for keyvalue's methods")
	require.NotNil(t, mc.Retry)
	require.NotNil(t, cfg.RetryThrottling)
}

func TestSetThenGet(t *testing.T) {
	peers := start(t, 0)
	out, err := runCmd(t, "set", "-peers", peers, "fruit", "apple")
	require.NoError(t, err)
	assert.Regexp(t, `^fruit set \(served by 127\.0\.0\.1:\d+ on attempt 1\)\n$`, out)

	out, err = runCmd(t, "get", "-peers", peers, "fruit")
	require.NoError(t, err)
	assert.Regexp(t, `^fruit = "apple" \(served by 127\.0\.0\.1:\d+ on attempt 1\)\n$`, out)

	_, err = runCmd(t, "get", "-peers", peers, "veg")
	require.EqualError(t, err, `key "veg" not found`)
	_, err = runCmd(t, "set", "-peers", peers, "1x", "y")
	require.EqualError(t, err, "invalid key: a key must start with a letter")
}

// With one of three instances answering Busy, calls that tried it first are
// retried on another instance and succeed, as the service config says.
func TestLoadRetriesBusyInstance(t *testing.T) {
	peers := start(t, 1)
	busyPeer := strings.Split(peers, ",")[0]
	out, err := runCmd(t, "load", "-peers", peers, "-n", "30")
	require.NoError(t, err)
	t.Log("\n" + out)

	m := regexp.MustCompile(`^30 calls: (\d+) ok \((\d+) after a retry\), (\d+) failed\n`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	ok, retried, failed := atoi(t, m[1]), atoi(t, m[2]), atoi(t, m[3])
	assert.Equal(t, 30, ok+failed)
	assert.Greater(t, retried, 0, "no call was retried after Busy")
	if failed > 0 { // retry throttling ran out of tokens: those fail Busy
		assert.Contains(t, out, "failed BUSY: "+strconv.Itoa(failed))
	}
	assert.Regexp(t, `peer `+regexp.QuoteMeta(busyPeer)+`: sent \d+, busy [1-9]`, out)
}

// Without a service config nothing is retried: a Busy answer is the result.
func TestNoConfigNoRetries(t *testing.T) {
	peers := start(t, 3)
	_, err := runCmd(t, "get", "-peers", peers, "-config", "", "k")
	var ce *channel.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 1, ce.Attempts)
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
		require.Error(t, err, "%q", tc.args)
		assert.Contains(t, err.Error(), tc.want, "%q", tc.args)
	}
}

func TestBadConfigIsRejected(t *testing.T) {
	path := t.TempDir() + "/bad.json"
	require.NoError(t, os.WriteFile(path, []byte(`{"methodConfig":[{"name":[{"service":"keyvalue"}],"retryPolicy":{"maxAttempts":1,"initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["BUSY"]}}]}`), 0o600))
	_, err := runCmd(t, "get", "-config", path, "k")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "maxAttempts")
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
	assert.Contains(t, testwait.Recv(t, lines, "serve's first line"), "answering Busy")
	assert.Contains(t, testwait.Recv(t, lines, "serve's second line"), ": serving")
	cancel()
	require.NoError(t, testwait.Recv(t, done, "serve to return"))
	w.Close() // ends the scanner
	for range lines {
	}
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
