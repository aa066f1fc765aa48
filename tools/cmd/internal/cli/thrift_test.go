package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/tools/internal/plainkv"
)

// keyvalueIDL is examples/keyvalue/keyvalue.thrift, tchannel-go's
// example IDL committed in the repository: the IDL yab's answers were
// recorded with.
func keyvalueIDL(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../../../examples/keyvalue/keyvalue.thrift")
	require.NoError(t, err)
	require.FileExists(t, p)
	return p
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

func yabCases(t *testing.T, file, idl string) []yabCase {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var cases []yabCase
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		words := strings.Split(line, "|")
		for i, w := range words {
			w = strings.ReplaceAll(w, "$IDL", idl)
			words[i] = strings.ReplaceAll(w, "$TESTDATA", "testdata/yab")
		}
		cases = append(cases, yabCase{words[0], words[1:]})
	}
	return cases
}

// encoding is the case's -e, or thrift.
func (c yabCase) encoding() string {
	for i, w := range c.args {
		if w == "-e" && i+1 < len(c.args) {
			return c.args[i+1]
		}
	}
	return "thrift"
}

// servedBy is the header Sluice's examples/keyvalue answers with, naming
// its own address: the one part of an answer that differs from the
// recording's server to the test's.
var servedBy = regexp.MustCompile(`"served-by": "127\.0\.0\.1:\d+"`)

// TestThriftMatchesYab makes the calls yab 0.22 made for
// scripts/record-yab-goldens.sh, with the same words, against the same
// servers: cases.txt's Thrift calls to tchannel-go's example on plain
// tchannel-go and to Sluice's examples/keyvalue, cases-serve.txt's JSON
// and raw calls to `sluice serve`. Each call is made twice. As is, stdout
// must be yab's body (Thrift's byte for byte once both are indented
// alike, JSON's the same JSON, raw's the bytes yab prints in base64), and
// the exit status 0 where yab said ok, 1 where the method threw or the
// call failed, 2 for a usage error, which sends nothing. With -o yab,
// stdout must be what yab printed, envelope and blank line included, and
// the exit status yab's.
func TestThriftMatchesYab(t *testing.T) {
	idl := keyvalueIDL(t)
	servers := map[string]func(*testing.T) string{"plain": startPlainKV, "sluice": startExampleKV,
		"serve": func(t *testing.T) string { return startServe(t) }}
	for _, server := range []string{"plain", "sluice", "serve"} {
		t.Run(server, func(t *testing.T) {
			peer := servers[server](t)
			file := "testdata/yab/cases.txt"
			if server == "serve" {
				file = "testdata/yab/cases-serve.txt"
			}
			for _, c := range yabCases(t, file, idl) {
				golden := "testdata/yab/" + server + "-" + c.name
				recorded, err := os.ReadFile(golden + ".json")
				require.NoError(t, err)
				exit, err := os.ReadFile(golden + ".exit")
				require.NoError(t, err)
				yabCode, err := strconv.Atoi(strings.TrimSpace(string(exit)))
				require.NoError(t, err, golden+".exit")
				usage := strings.HasPrefix(c.name, "usage-")

				start := time.Now()
				code, out, errOut := runCall(append([]string{"-p", peer}, c.args...)...)
				switch {
				case usage:
					require.Equal(t, 1, yabCode, "%s: yab's status for a usage error", c.name)
					assert.Equal(t, ExitUsage, code, "%s: stderr %s", c.name, errOut)
					assert.Empty(t, out, c.name)
					assert.Less(t, time.Since(start), time.Second, "%s: a usage error sends nothing", c.name)
				case len(recorded) == 0: // the call failed: yab printed no answer
					require.Equal(t, 1, yabCode, c.name)
					assert.Equal(t, ExitFail, code, "%s: stderr %s", c.name, errOut)
					assert.Empty(t, out, c.name)
				default:
					var yab struct {
						Body json.RawMessage `json:"body"`
						OK   bool            `json:"ok"`
					}
					require.NoError(t, json.Unmarshal(recorded, &yab), c.name)
					switch c.encoding() {
					case "thrift":
						var want bytes.Buffer
						require.NoError(t, json.Indent(&want, yab.Body, "", "  "))
						want.WriteByte('\n')
						assert.Equal(t, want.String(), out, "%s: stdout must be yab's body", c.name)
					case "json":
						assert.JSONEq(t, string(yab.Body), out, "%s: stdout must be yab's body", c.name)
					case "raw":
						var want []byte // yab prints raw bytes as base64
						require.NoError(t, json.Unmarshal(yab.Body, &want), c.name)
						assert.Equal(t, string(want)+"\n", out, "%s: stdout must be yab's body", c.name)
					}
					wantCode := ExitOK
					switch {
					case !yab.OK && c.encoding() == "thrift":
						wantCode = ExitFail
						assert.Regexp(t, `application error: \w+::\w+ threw \w+ \((KeyNotFound|InvalidKey|NotAuthorized)\)`, errOut, c.name)
					case !yab.OK:
						wantCode = ExitFail
						assert.Contains(t, errOut, "application error: the handler answered with an error", c.name)
					default:
						assert.Empty(t, errOut, c.name)
					}
					assert.Equal(t, wantCode, code, "%s: stderr %s", c.name, errOut)
				}

				code, out, errOut = runCall(append([]string{"-p", peer, "-o", "yab"}, c.args...)...)
				want := servedBy.ReplaceAllString(string(recorded), `"served-by": "PEER"`)
				assert.Equal(t, want, servedBy.ReplaceAllString(out, `"served-by": "PEER"`), "%s -o yab: stdout must be yab's", c.name)
				assert.Equal(t, yabCode, code, "%s -o yab: yab's exit status; stderr %s", c.name, errOut)
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
	assert.Equal(t, ExitFail, code)
	assert.JSONEq(t, `{"notAuthorized": {}}`, out)
	assert.Contains(t, errOut, "Admin::clearAll threw notAuthorized (NotAuthorized)")
	code, out, errOut = runCall("-p", peer, "-t", idl, "-s", "keyvalue", "-m", "Admin::clearAll", "-H", "user:root")
	assert.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, "{}\n", out)

	stdin = strings.NewReader(`{"key": "b", "value": "2"}`)
	t.Cleanup(func() { stdin = os.Stdin })
	code, _, errOut = runCall("-p", peer, "-t", idl, "keyvalue", "-f", "-", "KeyValue::Set", "-v", "--sk", "b", "--caller", "me")
	assert.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, errOut, `headers   {"count":"1"}`)
	code, out, _ = runCall("-p", peer, "-t", idl, "keyvalue", "KeyValue::Get", "-r", `{"key": "b"}`)
	assert.Equal(t, ExitOK, code)
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
		{[]string{"-t", idl, "keyvalue", "KeyValue::Get", "{}", "extra"}, `unexpected argument "extra"`},
		{[]string{"-t", idl, "keyvalue", "KeyValue::Get", "-r", "{}", "extra"}, `unexpected argument "extra"`},
		{[]string{"-t", idl, "keyvalue", "KeyValue::Get", "extra"}, `KeyValue::Get: the arguments: want a JSON object, got a string`},
		{[]string{"-t", idl, "keyvalue", "KeyValue::Get", "key: [a"}, `the request body is neither JSON nor YAML`},
		// A JSON or Thrift call's arg2 is its headers: --arg2 is then yab's (--headers).
		{[]string{"-s", "kv", "-m", "get", "--arg2", "x"}, "--arg2: want a map of header names to values, in JSON or YAML: got the scalar x"},
		{[]string{"-s", "kv", "-m", "get", "--headers", "a: [1]"}, "--headers: want a map of header names to values, in JSON or YAML: a: want a string, got a list"},
		{[]string{"-s", "kv", "-m", "get", "--headers", "{}", "--headers-file", "h.yaml"}, "give the headers' map once: --headers, --headers-file or --arg2"},
		{[]string{"-s", "kv", "-m", "get", "--headers-file", "/nonexistent/h.yaml"}, "--headers-file: open /nonexistent/h.yaml"},
		{[]string{"-s", "kv", "-m", "get", "-e", "raw", "-H", "a:b"}, "-H/--header needs -e json or thrift"},
		{[]string{"-s", "kv", "-m", "get", "-e", "raw", "--headers", "a: b"}, "--headers needs -e json or thrift"},
		{[]string{"-s", "kv", "-m", "get", "-e", "raw", "--headers-file", "h.yaml"}, "--headers-file needs -e json or thrift"},
		{[]string{"-s", "kv", "-m", "get", "--disable-thrift-envelope"}, "--disable-thrift-envelope is for Thrift calls; -e/--encoding is json"},
		// A Thrift method without its IDL is a usage error at once, not a
		// JSON call waiting for the timeout on a Thrift server.
		{[]string{"keyvalue", "KeyValue::Get", "-r", `{"key": "a"}`}, "KeyValue::Get is a Thrift method: give its IDL with -t/--thrift FILE.thrift"},
		{[]string{"-s", "keyvalue", "--procedure", "KeyValue::Get", "--timeout", "10s"}, "KeyValue::Get is a Thrift method: give its IDL with -t/--thrift FILE.thrift"},
		{[]string{"-s", "kv", "-m", "get", "--timeout", "0.5"}, `invalid value "0.5" for flag -timeout: want a duration (500ms, 1.5s) or a whole number of milliseconds (500)`},
		{[]string{"-s", "kv", "-m", "get", "--timeout", "0"}, "--timeout is 0s, must be > 0"},
		{[]string{"-s", "kv", "-m", "get", "-o", "xml"}, `-o/--output is "xml", must be body or yab`},
	} {
		code, out, errOut := runCall(append([]string{"-p", peer}, c.args...)...)
		assert.Equal(t, ExitUsage, code, "%v: %s", c.args, errOut)
		assert.Empty(t, out, "%v", c.args)
		assert.Contains(t, errOut, c.want, "%v", c.args)
	}
	assert.Less(t, time.Since(start), 5*time.Second, "usage errors send nothing, so wait for nothing")
}

// --arg2 sets a raw call's arg2, which a raw handler can read.
func TestCallRawArg2(t *testing.T) {
	peer := startArg2Echo(t)
	code, out, errOut := runCall("-p", peer, "-s", "kv", "-m", "arg2", "-e", "raw", "--arg2", "meta", "-r", "body")
	assert.Equal(t, ExitOK, code, errOut)
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
	require.Equal(t, ExitOK, code, errOut)
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
	// The exception is named by its type; the first response is yab's.
	assert.Equal(t, []any{map[string]any{"exception": "KeyNotFound", "calls": float64(50)}}, rep["application_errors"])
	assert.Equal(t, map[string]any{"body": map[string]any{"notFound": map[string]any{"key": "zz"}}, "ok": false, "trace": "0"}, rep["first_response"])
	var out, errb bytes.Buffer
	run([]string{"bench", "-p", peer, "-t", idl, "--warmup", "0", "keyvalue", "KeyValue::Get", "-r", `{"key": "zz"}`, "-n", "20"}, &out, &errb)
	assert.Contains(t, out.String(), "errors      APPLICATION 20 (KeyNotFound 20)\n", errb.String())

	code = run([]string{"bench", "-p", peer, "-t", idl, "keyvalue", "KeyValue::Gett"}, &out, &errb)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errb.String(), `service KeyValue has no method "Gett"`)
	code = run([]string{"bench", "--embedded", "1", "-t", idl, "keyvalue", "KeyValue::Get"}, &out, &errb)
	assert.Equal(t, ExitUsage, code)
}

// A body larger than a call can carry is a usage error, not a call that
// fails BAD_REQUEST once the whole file has been read.
func TestCallBodyOverTheLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.json")
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte(" "), maxBodyFile+1), 0o600))
	code, out, errOut := runCall("-p", "127.0.0.1:1", "-s", "kv", "-m", "get", "-f", path)
	assert.Equal(t, ExitUsage, code, errOut)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "the most a call sends")
}
