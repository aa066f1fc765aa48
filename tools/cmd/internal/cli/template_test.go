package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTemplate writes a -y template in a temporary directory, beside a
// copy of the keyvalue IDL, which it may name as keyvalue.thrift.
func writeTemplate(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	idl, err := os.ReadFile(keyvalueIDL(t))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "keyvalue.thrift"), idl, 0o600))
	path := filepath.Join(dir, "call.yab")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

// A template may name the peer, its headers reach the server, and the
// command line's flags win over its keys.
func TestCallTemplate(t *testing.T) {
	peer := startPlainKV(t)
	set := writeTemplate(t, `
peer: `+peer+`
service: keyvalue
thrift: keyvalue.thrift
method: KeyValue::Set
timeout: 500
shardKey: k
request:
  key: ${key:a}
  value: ${value}
`)
	code, out, errOut := runCall("-y", set, "-A", "value:ten")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, "{}\n", out)
	// -r and -m on the command line win over the template's request and method.
	code, out, errOut = runCall("-y", set, "-m", "KeyValue::Get", "-r", `{"key": "a"}`)
	require.Equal(t, ExitOK, code, errOut)
	assert.JSONEq(t, `{"result": "ten"}`, out)
	// A value from -A is read as YAML: 5 is a number, which a string
	// argument refuses, as yab's would.
	code, _, errOut = runCall("-y", set, "-A", "value:5")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut, "value: want a string, got a number")

	clear := writeTemplate(t, `
peers: [`+peer+`]
service: keyvalue
thrift: keyvalue.thrift
method: Admin::clearAll
headers:
  user: nobody
`)
	code, out, _ = runCall("-y", clear)
	assert.Equal(t, ExitFail, code)
	assert.JSONEq(t, `{"notAuthorized": {}}`, out)
	code, out, errOut = runCall("-y", clear, "-H", "user:root") // -H over the template's headers
	assert.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, "{}\n", out)
}

func TestCallTemplateErrors(t *testing.T) {
	peer := startPlainKV(t)
	start := time.Now()
	for _, c := range []struct {
		template string
		args     []string
		want     string
	}{
		{"service: keyvalue\nmethod: KeyValue::Get\nthrift: keyvalue.thrift\nrequest: {key: '${key}'}\n", nil,
			"${key} has no value and no default: give -A key:VALUE"},
		{"service: keyvalue\nmethod: KeyValue::Get\nthrift: keyvalue.thrift\nrequest: {key: '${key'}\n", nil, "${ without its }"},
		// Of several missing, the first by the request's keys, every time.
		{"service: keyvalue\nmethod: KeyValue::Set\nthrift: keyvalue.thrift\nrequest: {value: '${v}', key: '${k}'}\n", nil,
			"${k} has no value and no default: give -A k:VALUE"},
		{"service: keyvalue\nmethd: KeyValue::Get\n", nil, `unknown key "methd"; a template has peer, peers`},
		{"service: keyvalue\nmethod: KeyValue::Get\nprocedure: KeyValue::Set\n", nil, `key "method" given twice`},
		{"service: keyvalue\nbaggage: {a: b}\n", nil, "baggage is yab's and not supported by sluice call"},
		{"service: keyvalue\nrequests: [{}]\n", nil, "requests is yab's and not supported by sluice call"},
		{"service: [keyvalue]\n", nil, "service: want a string, got a list"},
		{"service: keyvalue\ntimeout: soon\n", nil, "timeout: want a duration"},
		{"service: keyvalue\nmethod: KeyValue::Get\nthrift: keyvalue.thrift\n", []string{"-A", "novalue"}, `-A/--arg "novalue": want NAME:VALUE`},
		{"service: keyvalue\n\tbad", nil, "call.yab: yaml:"},
	} {
		path := writeTemplate(t, c.template)
		code, out, errOut := runCall(append([]string{"-p", peer, "-y", path}, c.args...)...)
		assert.Equal(t, ExitUsage, code, "%q: %s", c.template, errOut)
		assert.Empty(t, out)
		assert.Contains(t, errOut, c.want, "%q", c.template)
		assert.Contains(t, errOut, "sluice call: -y/--yaml-template: ", "%q", c.template)
	}
	code, _, errOut := runCall("-p", peer, "-y", "/nonexistent/get.yab")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut, "-y/--yaml-template: open /nonexistent/get.yab")
	code, _, errOut = runCall("-p", peer, "-s", "keyvalue", "-m", "get", "-A", "key:a")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut, "-A/--arg fills a template's ${NAME}: give the template with -y FILE")
	assert.Less(t, time.Since(start), 5*time.Second, "usage errors send nothing, so wait for nothing")
}

// -o yab exits as yab does: 1 for a usage error wherever -o comes, 0 for
// an application error, 1 for a failed call.
func TestCallYabExitStatuses(t *testing.T) {
	peer := startServe(t)
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"-o", "yab", "-p", peer, "-s", "echo", "-m", "echo", "--nope"}, ExitFail},
		{[]string{"-p", peer, "-s", "echo", "-m", "echo", "--nope", "-o", "yab"}, ExitFail},
		{[]string{"--output=yab", "-p", peer, "-s", "echo", "-m", "echo", "--timeout", "soon"}, ExitFail},
		{[]string{"-p", peer, "-s", "echo", "-m", "echo", "--timeout", "soon"}, ExitUsage},
		{[]string{"-o", "yab", "-p", peer, "-s", "echo", "-m", "fail"}, ExitOK},
		{[]string{"-o", "yab", "-p", peer, "-s", "echo", "-m", "busy"}, ExitFail},
		{[]string{"-o", "yab", "-p", "127.0.0.1:1", "-s", "echo", "-m", "echo"}, ExitFail},
		{[]string{"-o", "yab", "-h"}, ExitOK},
	} {
		code, _, errOut := runCall(c.args...)
		assert.Equal(t, c.want, code, "%q: %s", c.args, errOut)
	}
}
