package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/tools/internal/plainkv"
)

// keyvalueIDL is tchannel-go's examples/keyvalue/keyvalue.thrift, in the
// module cache: the IDL yab's answers were recorded with.
func keyvalueIDL(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/uber/tchannel-go").Output()
	require.NoError(t, err, "go list tchannel-go")
	return filepath.Join(strings.TrimSpace(string(out)), "examples", "keyvalue", "keyvalue.thrift")
}

// startPlainKV serves the example KeyValue service from plain tchannel-go.
func startPlainKV(t *testing.T) string {
	t.Helper()
	ch, err := plainkv.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(ch.Close)
	return ch.PeerInfo().HostPort
}

// startExampleKV builds and runs Sluice's examples/keyvalue server on
// 127.0.0.1, as a user would, and returns its host:port.
func startExampleKV(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "keyvalue")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/sluice-rpc/sluice/examples/keyvalue").CombinedOutput()
	require.NoError(t, err, "go build examples/keyvalue: %s", out)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cancel(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "examples/keyvalue printed no address")
	hp := regexp.MustCompile(`127\.0\.0\.1:\d+`).FindString(line)
	require.NotEmpty(t, hp, "examples/keyvalue said %q", line)
	return hp
}

// yabCase is a line of testdata/yab/cases.txt.
type yabCase struct {
	name string
	args []string
}

func yabCases(t *testing.T, idl string) []yabCase {
	t.Helper()
	b, err := os.ReadFile("testdata/yab/cases.txt")
	require.NoError(t, err)
	var cases []yabCase
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, args, _ := strings.Cut(line, "|")
		words := strings.Fields(args)
		for i, w := range words {
			if w == "$IDL" {
				words[i] = idl
			}
		}
		cases = append(cases, yabCase{name, words})
	}
	return cases
}

// TestThriftMatchesYab makes the calls yab 0.22 made for
// scripts/record-yab-goldens.sh, with the same words, against the same two
// servers: tchannel-go's example on plain tchannel-go, and Sluice's
// examples/keyvalue. stdout must be yab's body, byte for byte once both are
// indented alike, and the exit status 0 where yab said ok and 1 (an
// application error) where the method threw.
func TestThriftMatchesYab(t *testing.T) {
	idl := keyvalueIDL(t)
	servers := map[string]func(*testing.T) string{"plain": startPlainKV, "sluice": startExampleKV}
	for _, server := range []string{"plain", "sluice"} {
		t.Run(server, func(t *testing.T) {
			peer := servers[server](t)
			for _, c := range yabCases(t, idl) {
				recorded, err := os.ReadFile("testdata/yab/" + server + "-" + c.name + ".json")
				require.NoError(t, err)
				var yab struct {
					Body json.RawMessage `json:"body"`
					OK   bool            `json:"ok"`
				}
				require.NoError(t, json.Unmarshal(recorded, &yab), c.name)
				var want bytes.Buffer
				require.NoError(t, json.Indent(&want, yab.Body, "", "  "))
				want.WriteByte('\n')

				code, out, errOut := runCall(append([]string{"-p", peer}, c.args...)...)
				assert.Equal(t, want.String(), out, "%s: stdout must be yab's body", c.name)
				wantCode := exitOK
				if !yab.OK {
					wantCode = exitFail
					assert.Regexp(t, `application error: KeyValue::Get threw \w+ \((KeyNotFound|InvalidKey)\)`, errOut, c.name)
				} else {
					assert.Empty(t, errOut, c.name)
				}
				assert.Equal(t, wantCode, code, "%s: stderr %s", c.name, errOut)
			}
		})
	}
}

// Headers, transport headers, positional words and -f - reach a real
// tchannel-go Thrift server, and -v shows the answer's headers.
func TestCallThriftHeadersAndStdin(t *testing.T) {
	idl, peer := keyvalueIDL(t), startPlainKV(t)
	// Admin::clearAll needs the header user:root (from the example).
	code, out, errOut := runCall("-p", peer, "-t", idl, "-s", "keyvalue", "-m", "Admin::clearAll")
	assert.Equal(t, exitFail, code)
	assert.JSONEq(t, `{"notAuthorized": {}}`, out)
	assert.Contains(t, errOut, "Admin::clearAll threw notAuthorized (NotAuthorized)")
	code, out, errOut = runCall("-p", peer, "-t", idl, "-s", "keyvalue", "-m", "Admin::clearAll", "-H", "user:root")
	assert.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "{}\n", out)

	stdin = strings.NewReader(`{"key": "b", "value": "2"}`)
	t.Cleanup(func() { stdin = os.Stdin })
	code, _, errOut = runCall("-p", peer, "-t", idl, "keyvalue", "-f", "-", "KeyValue::Set", "-v", "--sk", "b", "--caller", "me")
	assert.Equal(t, exitOK, code, errOut)
	assert.Contains(t, errOut, `headers   {"count":"1"}`)
	code, out, _ = runCall("-p", peer, "-t", idl, "keyvalue", "KeyValue::Get", "-r", `{"key": "b"}`)
	assert.Equal(t, exitOK, code)
	assert.JSONEq(t, `{"result": "2"}`, out)
}

func TestCallThriftUsageErrors(t *testing.T) {
	idl, peer := keyvalueIDL(t), startPlainKV(t)
	start := time.Now()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-s", "keyvalue", "-m", "KeyValue::Get", "-e", "thrift"}, "-e thrift needs the IDL: -t/--thrift FILE.thrift"},
		{[]string{"-t", idl, "keyvalue", "KeyValue::Gett"}, `service KeyValue has no method "Gett"; it has KeyValue::Get, KeyValue::HealthCheck, KeyValue::Set`},
		{[]string{"-t", idl, "keyvalue", "Get"}, `a Thrift method is named Service::method`},
		{[]string{"-t", idl, "keyvalue", "KeyValue::Get", "-r", `{"kee": "a"}`}, `the arguments: no field "kee" (fields: key)`},
		{[]string{"-t", idl, "keyvalue", "KeyValue::Get", "-r", `{"key": 1}`}, `key: want a string, got a number`},
		{[]string{"-t", "/nonexistent.thrift", "keyvalue", "KeyValue::Get"}, "-t/--thrift: thrift IDL: stat /nonexistent.thrift"},
		{[]string{"-t", idl, "-e", "json", "keyvalue", "KeyValue::Get"}, "-t/--thrift makes a Thrift call; -e/--encoding is json"},
		{[]string{"--health", "keyvalue", "KeyValue::Get"}, "--health calls Meta::health; drop -m/--method"},
		{[]string{"--health"}, "give the service"},
		{[]string{"-t", idl, "keyvalue"}, "give the method"},
		{[]string{"-t", idl, "keyvalue", "KeyValue::Get", "extra"}, `unexpected argument "extra"`},
		{[]string{"-s", "kv", "-m", "get", "--arg2", "x"}, "--arg2 is a raw call's arg2; -e/--encoding is json"},
		{[]string{"-s", "kv", "-m", "get", "-e", "raw", "-H", "a:b"}, "-H/--header needs -e json or thrift"},
	} {
		code, out, errOut := runCall(append([]string{"-p", peer}, c.args...)...)
		assert.Equal(t, exitUsage, code, "%v: %s", c.args, errOut)
		assert.Empty(t, out, "%v", c.args)
		assert.Contains(t, errOut, c.want, "%v", c.args)
	}
	assert.Less(t, time.Since(start), 5*time.Second, "usage errors send nothing, so wait for nothing")
}

// --arg2 sets a raw call's arg2, which a raw handler can read.
func TestCallRawArg2(t *testing.T) {
	peer := startArg2Echo(t)
	code, out, errOut := runCall("-p", peer, "-s", "kv", "-m", "arg2", "-e", "raw", "--arg2", "meta", "-r", "body")
	assert.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "meta|body\n", out)
}

// startArg2Echo serves raw "arg2", answering arg2|arg3.
func startArg2Echo(t *testing.T) string {
	t.Helper()
	ch, err := channel.New("kv")
	require.NoError(t, err)
	t.Cleanup(ch.Close)
	ch.RegisterRaw("arg2", func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
		return &channel.RawResponse{Arg3: append(append(append([]byte{}, req.Arg2...), '|'), req.Arg3...)}, nil
	})
	require.NoError(t, ch.ListenAndServe("127.0.0.1:0"))
	return ch.HostPort()
}

// sluice bench sends Thrift calls through the IDL, as call does: every call
// succeeds against plain tchannel-go, and a declared exception counts as an
// application error, not a success.
func TestBenchThrift(t *testing.T) {
	idl, peer := keyvalueIDL(t), startPlainKV(t)
	code, _, errOut := runCall("-p", peer, "-t", idl, "keyvalue", "KeyValue::Set", "-r", `{"key": "a", "value": "1"}`)
	require.Equal(t, exitOK, code, errOut)
	bench := func(args ...string) (map[string]any, string) {
		var out, errOut bytes.Buffer
		code := run(append([]string{"bench", "-p", peer, "-t", idl, "-o", "json", "--warmup", "0"}, args...), &out, &errOut)
		var rep map[string]any
		require.NoError(t, json.Unmarshal(out.Bytes(), &rep), "exit %d: %s", code, errOut.String())
		return rep, errOut.String()
	}
	rep, errOut := bench("keyvalue", "KeyValue::Get", "-r", `{"key": "a"}`, "-n", "300", "--sk", "a")
	assert.EqualValues(t, 300, rep["calls"], errOut)
	assert.EqualValues(t, 300, rep["ok"], errOut)
	assert.Equal(t, "unbounded", rep["mode"])

	rep, errOut = bench("-s", "keyvalue", "-m", "KeyValue::Get", "-r", `{"key": "zz"}`, "-n", "50")
	assert.EqualValues(t, 50, rep["calls"], errOut)
	assert.EqualValues(t, 0, rep["ok"], errOut)
	assert.Equal(t, map[string]any{"APPLICATION": float64(50)}, rep["errors"])

	var out, errb bytes.Buffer
	code = run([]string{"bench", "-p", peer, "-t", idl, "keyvalue", "KeyValue::Gett"}, &out, &errb)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errb.String(), `service KeyValue has no method "Gett"`)
	code = run([]string{"bench", "--embedded", "1", "-t", idl, "keyvalue", "KeyValue::Get"}, &out, &errb)
	assert.Equal(t, exitUsage, code)
}

// A body larger than a call can carry is a usage error, not a call that
// fails BAD_REQUEST once the whole file has been read.
func TestCallBodyOverTheLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.json")
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte(" "), maxBodyFile+1), 0o600))
	code, out, errOut := runCall("-p", "127.0.0.1:1", "-s", "kv", "-m", "get", "-f", path)
	assert.Equal(t, exitUsage, code, errOut)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "the most a call sends")
}
