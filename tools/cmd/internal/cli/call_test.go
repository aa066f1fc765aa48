package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	tjson "github.com/uber/tchannel-go/json"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/retry"
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
		return map[string]any{"got": req["key"], "attempt": ctx.Headers()[retry.AttemptsHeader]}, nil
	}})
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return ch.HostPort()
}

func runCall(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(append([]string{"call"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// verbose reads the attempts and peers -v prints on stderr.
var verbose = regexp.MustCompile(`(?m)^attempts  (\d+)\npeers     (.*)$`)

// stdout holds the response body and nothing else, so that a pipe to jq
// works; stderr holds nothing without -v.
func TestCallPrintsOnlyTheBody(t *testing.T) {
	good := startKV(t, false)
	code, out, errOut := runCall("-p", good, "-s", "kv", "-m", "get", "-r", `{"key":"k"}`)
	var body map[string]any
	if code != 0 || errOut != "" || json.Unmarshal([]byte(out), &body) != nil || body["got"] != "k" {
		t.Fatalf("json call: exit %d, stdout %q, stderr %q; want only the JSON body on stdout", code, out, errOut)
	}
	code, out, errOut = runCall("-p", good, "-s", "kv", "-m", "echo", "-e", "raw", "-r", "hello")
	if code != 0 || out != "hello\n" || errOut != "" {
		t.Fatalf("raw call: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The body from a file, and -v's account on stderr.
	file := filepath.Join(t.TempDir(), "req.json")
	if err := os.WriteFile(file, []byte(`{"key": "from-file"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCall("-p", good, "-s", "kv", "-m", "get", "-f", file, "-v")
	if code != 0 || !strings.Contains(out, `"got":"from-file"`) || strings.Contains(out, "attempts") {
		t.Fatalf("-f call: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, want := range []string{"peer      " + good + "\n", "attempts  1\n", "peers     " + good + "\n", "time      "} {
		if !strings.Contains(errOut, want) {
			t.Errorf("-v stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestCallRetries(t *testing.T) {
	good, bad1, bad2 := startKV(t, false), startKV(t, true), startKV(t, true)

	// Two busy peers and a good one with 3 attempts: the call gets through,
	// each attempt on another peer, the good one last; the handler sees how
	// many attempts came before. Peers are chosen at random, so call until
	// one call needed retries (10 calls all lucky: odds 1.7e-5).
	retried := false
	for i := 0; i < 10 && !retried; i++ {
		code, out, errOut := runCall("-p", bad1, "--peer", bad2, "-p", good, "-s", "kv", "-m", "get",
			"-r", `{"key":"k"}`, "--retry-max", "3", "-v")
		if code != 0 || !strings.Contains(out, `"got":"k"`) {
			t.Fatalf("json call with retries: exit %d\n%s%s", code, out, errOut)
		}
		m := verbose.FindStringSubmatch(errOut)
		if m == nil {
			t.Fatalf("no attempts and peers lines in %q", errOut)
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
			if want := fmt.Sprintf(`"attempt":"%d"`, attempts-1); !strings.Contains(out, want) {
				t.Fatalf("retried call: handler saw %q, want %s", out, want)
			}
		}
	}
	if !retried {
		t.Fatal("10 calls all went to the good peer first")
	}

	// Only busy peers: exit 1, the code named on stderr, nothing on stdout.
	code, out, errOut := runCall("-P", writePeerList(t, "peers.txt", bad1+"\n# the other\n"+bad2+"\n"), "-s", "kv", "-m", "echo",
		"-e", "raw", "-r", "x", "--retry-max", "2", "--retry-codes", "BUSY", "-v")
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "sluice call: ") || !strings.Contains(errOut, "BUSY") ||
		!strings.Contains(errOut, "\nattempts  2\n") {
		t.Fatalf("busy call: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}

	// A service config file's retry policy applies: one busy peer, retried
	// up to the policy's three attempts (without the policy, one). One peer
	// keeps the count from depending on which connection is up first.
	cfg := filepath.Join(t.TempDir(), "sc.json")
	os.WriteFile(cfg, []byte(`{"methodConfig":[{"name":[{"service":"kv"}],"retryPolicy":{"maxAttempts":3,
		"initialBackoff":"0.001s","maxBackoff":"0.01s","backoffMultiplier":2,"retryableStatusCodes":["BUSY"]}}]}`), 0o600)
	code, out, errOut = runCall("-p", bad1, "-s", "kv", "-m", "echo", "-e", "raw", "-r", "y", "--service-config", cfg, "-v")
	if code != 1 || out != "" || !strings.Contains(errOut, "BUSY") || !strings.Contains(errOut, "\nattempts  3\n") {
		t.Fatalf("config call: exit %d, want 1 after 3 attempts\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

// An application error: its body on stdout (it is the response), a note
// on stderr, exit 1. Headers reach the server and, with -v, come back.
func TestCallApplicationErrorAndHeaders(t *testing.T) {
	peer := startServe(t)
	code, out, errOut := runCall("-p", peer, "-s", "echo", "-m", "fail")
	if code != 1 || out != serveFailBody+"\n" || !strings.Contains(errOut, "application error") {
		t.Fatalf("fail: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCall("-p", peer, "-s", "echo", "-m", "echo", "-r", `{"a":1}`, "-H", "k:v:w", "-H", "auth:x", "-v")
	if code != 0 || out != `{"a":1}`+"\n" || !strings.Contains(errOut, `headers   {"auth":"x","k":"v:w"}`) {
		t.Fatalf("echo with headers: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// With nothing listening the call fails at once, UNAVAILABLE, not at its
// timeout: connections are made by the peer's connector, and a peer whose
// connection was refused is in transient failure.
func TestCallFailsFastWithNothingListening(t *testing.T) {
	start := time.Now()
	code, out, errOut := runCall("-p", testnet.Refused(t), "-s", "kv", "-m", "get", "--timeout", "20s")
	if took := time.Since(start); code != 1 || out != "" || !strings.Contains(errOut, "UNAVAILABLE") || took > 10*time.Second {
		t.Fatalf("exit %d after %v, stdout %q, stderr %q; want exit 1 with UNAVAILABLE well before the 20s timeout", code, took, out, errOut)
	}
}

func TestCallCommandRejectsBadInput(t *testing.T) {
	list := writePeerList(t, "bad.txt", "127.0.0.1:1\nnohost\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-s", "kv", "-m", "m"}, "give a peer"},
		{[]string{"-p", "127.0.0.1:1", "-m", "m"}, "give the service: -s/--service SERVICE, or SERVICE METHOD after the flags"},
		{[]string{"-p", "127.0.0.1:1", "-s", "kv"}, "give the method: -m/--method METHOD"},
		{[]string{"-p", "127.0.0.1:1", "-s", "kv", "-m", "m", "-r", "x", "-f", "y"}, "not both"},
		{[]string{"-p", "127.0.0.1:1", "-s", "kv", "-m", "m", "-r", "{nope"}, "not valid JSON"},
		{[]string{"-p", "127.0.0.1:1", "-s", "kv", "-m", "m", "-e", "thrift"}, "-e thrift needs the IDL: -t/--thrift FILE.thrift"},
		{[]string{"-p", "127.0.0.1:1", "-s", "kv", "-m", "m", "-e", "yaml"}, `-e/--encoding is "yaml", must be json, raw or thrift`},
		{[]string{"-p", "127.0.0.1:1", "-s", "kv", "-m", "m", "-e", "raw", "-H", "a:b"}, "-H/--header needs -e json"},
		{[]string{"-p", "127.0.0.1:1", "-s", "kv", "-m", "m", "-H", "nocolon"}, `-H/--header "nocolon": want key:value`},
		{[]string{"-p", "127.0.0.1:1", "-s", "kv", "-m", "m", "-f", "/nonexistent/body.json"}, "-f/--file: open"},
		{[]string{"-p", "nohost", "-s", "kv", "-m", "m"}, `--peer: peer: bad host:port "nohost"`},
		{[]string{"-P", list, "-s", "kv", "-m", "m"}, "--peer-list " + list + `: line 2: peer: bad host:port "nohost"`},
		{[]string{"-p", "127.0.0.1:1", "-s", "kv", "-m", "m", "--retry-max", "1"}, "--retry-max is 1"},
		{[]string{"-p", "127.0.0.1:1", "-s", "kv", "-m", "m", "--retry-max", "3", "--retry-codes", "SLOW"}, "--retry-codes"},
		{[]string{"-p", "127.0.0.1:1", "-s", "kv", "-m", "m", "--retry-max", "3", "--hedge-max", "3"}, "exclusive"},
		{[]string{"-p", " 127.0.0.1:1", "-s", "kv", "-m", "m"}, "bad host:port"},
		{[]string{"-p", "999.999.999.999:1", "-s", "kv", "-m", "m"}, "bad host:port"},
		{[]string{"-p", "127.0.0.1:1", "-s", "kv", "-m", "m", "--timeout", "0s"}, "--timeout is 0s"},
		{[]string{"-p", "127.0.0.1:1", "-s", "kv", "-m", "m", "--json", "{}"}, "flag provided but not defined: -json"},
		{[]string{"-p", "127.0.0.1:1", "-s", "kv", "-m", "m", "--config", "x.json"}, "flag provided but not defined: -config"},
	} {
		code, out, errOut := runCall(tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// --retry-backoff sets the policy's initialBackoff and, times ten, its
// maxBackoff: a value whose tenfold overflows is refused by name, not turned
// into a negative maxBackoff.
func TestCallRetryBackoffIsBounded(t *testing.T) {
	code, _, errOut := runCall("-p", "127.0.0.1:1", "-s", "kv", "-m", "m", "-e", "raw", "-r", "x", "--retry-max", "3", "--retry-backoff", "2000000h")
	if code != 2 || !strings.Contains(errOut, "--retry-backoff is 2000000h0m0s, must be in (0, 1h0m0s]") || strings.Contains(errOut, "is -") {
		t.Fatalf("exit %d, stderr %q; want 2 and --retry-backoff named with its bound", code, errOut)
	}
}

func writePeerList(t *testing.T, name, text string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// An error line has one prefix, the command's: the library's errors start
// "sluice: " as Go errors do, which after "sluice call: " would be a second.
func TestCallErrorHasOnePrefix(t *testing.T) {
	code, out, errOut := runCall("-p", "127.0.0.1:1", "-s", "kv", "-m", "get")
	want := "sluice call: call kv::get: UNAVAILABLE: "
	if code != ExitFail || out != "" || !strings.HasPrefix(errOut, want) || strings.Contains(errOut, "sluice: ") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing, and stderr starting %q", code, out, errOut, want)
	}
}
