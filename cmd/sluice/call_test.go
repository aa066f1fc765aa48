package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/channel"
	tjson "github.com/uber/tchannel-go/json"
)

// startKV starts a real server of "kv" on 127.0.0.1: raw "echo" and JSON
// "get", answering Busy while busy is true.
func startKV(t *testing.T, busy bool) string {
	t.Helper()
	ch, err := channel.New("kv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	ch.RegisterRaw("echo", func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
		if busy {
			return nil, channel.Busy("overloaded")
		}
		return &channel.RawResponse{Arg3: req.Arg3}, nil
	})
	ch.RegisterJSON(map[string]any{"get": func(ctx tjson.Context, req map[string]any) (map[string]any, error) {
		if busy {
			return nil, channel.Busy("overloaded")
		}
		return map[string]any{"got": req["key"], "attempt": ctx.Headers()[channel.AttemptsHeader]}, nil
	}})
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return ch.HostPort()
}

func TestCallCommand(t *testing.T) {
	good, bad1, bad2 := startKV(t, false), startKV(t, true), startKV(t, true)

	var out, errOut bytes.Buffer
	code := run([]string{"call", "--peer", good, "--service", "kv", "--method", "echo", "--raw", "hello"}, &out, &errOut)
	if code != 0 || !strings.HasPrefix(out.String(), "hello\nattempts: 1\npeers: "+good) {
		t.Fatalf("raw call: exit %d\n%s%s", code, out.String(), errOut.String())
	}

	// Two busy peers and a good one with 3 attempts: the call gets through,
	// each attempt on another peer, the good one last; the handler sees how
	// many attempts came before. Peers are chosen at random, so call until
	// one call needed retries (10 calls all lucky: odds 1.7e-5).
	retried := false
	for i := 0; i < 10 && !retried; i++ {
		out.Reset()
		code = run([]string{"call", "--peer", bad1, "--peer", bad2, "--peer", good, "--service", "kv", "--method", "get",
			"--json", `{"key":"k"}`, "--retry-max", "3"}, &out, &errOut)
		if code != 0 || !strings.Contains(out.String(), `"got":"k"`) {
			t.Fatalf("json call with retries: exit %d\n%s%s", code, out.String(), errOut.String())
		}
		m := regexp.MustCompile(`attempts: (\d+)\npeers: (.*)\n`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no attempts and peers lines in %q", out.String())
		}
		attempts, _ := strconv.Atoi(m[1])
		peers := strings.Fields(m[2])
		if len(peers) != attempts || peers[len(peers)-1] != good {
			t.Fatalf("attempts %d on peers %v: want one peer per attempt, the good one (%s) last", attempts, peers, good)
		}
		seen := map[string]bool{}
		for _, p := range peers {
			if seen[p] {
				t.Fatalf("peer %s used twice in %v", p, peers)
			}
			seen[p] = true
		}
		if attempts > 1 {
			retried = true
			if want := fmt.Sprintf(`"attempt":"%d"`, attempts-1); !strings.Contains(out.String(), want) {
				t.Fatalf("retried call: handler saw %q, want %s", out.String(), want)
			}
		}
	}
	if !retried {
		t.Fatal("10 calls all went to the good peer first")
	}

	// Only busy peers: exit non-zero with the code name.
	out.Reset()
	errOut.Reset()
	code = run([]string{"call", "--peer", bad1, "--peer", bad2, "--service", "kv", "--method", "echo", "--raw", "x",
		"--retry-max", "2", "--retry-codes", "BUSY"}, &out, &errOut)
	if code != 1 || !strings.HasPrefix(errOut.String(), "error: BUSY: ") || !strings.Contains(errOut.String(), "attempts: 2\n") {
		t.Fatalf("busy call: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}

	// A config file works the same way.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sc.json")
	os.WriteFile(cfg, []byte(`{"methodConfig":[{"name":[{"service":"kv"}],"retryPolicy":{"maxAttempts":3,
		"initialBackoff":"0.001s","maxBackoff":"0.01s","backoffMultiplier":2,"retryableStatusCodes":["BUSY"]}}]}`), 0o600)
	out.Reset()
	code = run([]string{"call", "--peer", bad1, "--peer", good, "--service", "kv", "--method", "echo", "--raw", "y", "--config", cfg}, &out, &errOut)
	if code != 0 || !strings.HasPrefix(out.String(), "y\n") {
		t.Fatalf("config call: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

func TestCallCommandRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"call", "--service", "kv", "--method", "m", "--raw", "x"},
		{"call", "--peer", "127.0.0.1:1", "--method", "m", "--raw", "x"},
		{"call", "--peer", "127.0.0.1:1", "--service", "kv", "--method", "m"},
		{"call", "--peer", "127.0.0.1:1", "--service", "kv", "--method", "m", "--raw", "x", "--json", "{}"},
		{"call", "--peer", "127.0.0.1:1", "--service", "kv", "--method", "m", "--json", "{nope"},
		{"call", "--peer", "nohost", "--service", "kv", "--method", "m", "--raw", "x"},
		{"call", "--peer", "127.0.0.1:1", "--service", "kv", "--method", "m", "--raw", "x", "--retry-max", "1"},
		{"call", "--peer", "127.0.0.1:1", "--service", "kv", "--method", "m", "--raw", "x", "--retry-max", "3", "--retry-codes", "SLOW"},
		{"call", "--peer", "127.0.0.1:1", "--service", "kv", "--method", "m", "--raw", "x", "--retry-max", "3", "--hedge-max", "3"},
		{"call", "--peer", " 127.0.0.1:1", "--service", "kv", "--method", "m", "--raw", "x"},
		{"call", "--peer", "999.999.999.999:1", "--service", "kv", "--method", "m", "--raw", "x"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 || errOut.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, errOut.String())
		}
	}
}

// --retry-backoff sets the policy's initialBackoff and, times ten, its
// maxBackoff: a value whose tenfold overflows is refused by name, not turned
// into a negative maxBackoff.
func TestCallRetryBackoffIsBounded(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"call", "--peer", "127.0.0.1:1", "--service", "kv", "--method", "m", "--raw", "x", "--retry-max", "3", "--retry-backoff", "2000000h"}
	code := run(args, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "--retry-backoff is 2000000h0m0s, must be in (0, 1h0m0s]") || strings.Contains(errOut.String(), "is -") {
		t.Fatalf("exit %d, stderr %q; want 2 and --retry-backoff named with its bound", code, errOut.String())
	}
}
