package channel

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/slogtest"
)

const namesConfig = `{"methodConfig":[
  {"name":[{"service":"kv","method":"Get"},{"service":"kv","method":"KeyValue::Set"},{"service":"kv","method":"put"},
           {"service":"kv","method":"echo"},{"service":"other","method":"x"}],"timeout":"1s"},
  {"name":[{"service":"kv"}],"timeout":"2s"}]}`

// Debug lists, per Client, the method names the service config names for
// its service that no call has used yet; a Client is listed from the
// moment it is made, before it has peers or calls.
func TestDebugListsUnmatchedConfigNames(t *testing.T) {
	s := startServer(t)
	c, err := New("client", WithServiceConfig(mustConfig(t, namesConfig)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv").AddPeer(s.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	to(c, "other")
	unmatched := func(svc string) []string {
		t.Helper()
		return debugService(t, c.Debug(), svc).UnmatchedMethods
	}
	if got, want := unmatched("kv"), []string{"Get", "KeyValue::Set", "echo", "put"}; !slices.Equal(got, want) {
		t.Errorf("before any call: kv's unmatched methods are %q, want %q", got, want)
	}
	if got, want := unmatched("other"), []string{"x"}; !slices.Equal(got, want) {
		t.Errorf("other's unmatched methods are %q, want %q", got, want)
	}

	// A Thrift-style call to "KeyValue::Get" leaves "Get" unmatched (the
	// server has no such method: the call fails, but it was made).
	for _, m := range []string{"echo", "KeyValue::Get", "KeyValue::Set"} {
		_, _ = to(c, "kv").CallRaw(ctxTimeout(t), m, nil, []byte("x"))
	}
	if got, want := unmatched("kv"), []string{"Get", "put"}; !slices.Equal(got, want) {
		t.Errorf("after the calls: kv's unmatched methods are %q, want %q", got, want)
	}

	b, err := json.Marshal(c.Debug())
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	if !strings.Contains(string(b), `"unmatchedMethods":["Get","put"]`) {
		t.Errorf("the JSON state does not list kv's unmatchedMethods: %s", b)
	}

	// Without a service config, nothing is unmatched, and never null.
	c2, _, _ := startClient(t, s)
	if _, err := to(c2, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil); err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	if got := debugService(t, c2.Debug(), "kv").UnmatchedMethods; got == nil || len(got) != 0 {
		t.Errorf("without a config: got %#v, want an empty list", got)
	}
}

// The first call whose method differs from a configured name only in a
// "Service::" prefix logs one warning naming the name the config should
// use, once per configured name, whichever way round the prefix is.
func TestConfigNameMissingThriftPrefixIsLoggedOnce(t *testing.T) {
	s := startServer(t)
	log := &slogtest.Lines{Floor: slog.LevelWarn}
	c, err := New("client", WithServiceConfig(mustConfig(t, namesConfig)), WithLogger(log.Logger()))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv").AddPeer(s.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	call := func(method string) {
		for i := 0; i < 3; i++ {
			_, _ = to(c, "kv").CallRaw(ctxTimeout(t), method, nil, []byte("x"))
		}
	}

	call("echo") // named exactly: nothing to say
	call("unrelated")
	if got := log.Matching("service config names method"); len(got) != 0 {
		t.Fatalf("calls that match, or resemble no configured name, logged %q", got)
	}

	call("KeyValue::Get") // the config says "Get"
	call("Other::Get")    // the same configured name: no second line
	got := log.Matching("service config names method")
	if len(got) != 1 {
		t.Fatalf("got %d warnings, want 1: %q", len(got), got)
	}
	for _, want := range []string{`"Get"`, `"kv"`, `name it "KeyValue::Get"`, "Service::method"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("warning %q does not say %s", got[0], want)
		}
	}

	call("Set") // the config says "KeyValue::Set"
	got = log.Matching("service config names method")
	if len(got) != 2 {
		t.Fatalf("got %d warnings, want 2: %q", len(got), got)
	}
	for _, want := range []string{`"KeyValue::Set"`, `name it "Set"`} {
		if !strings.Contains(got[1], want) {
			t.Errorf("warning %q does not say %s", got[1], want)
		}
	}
}

// With no logger given, a Client whose WithMethods names the Thrift method
// "KeyValue::Get" of a service the config names as "Get" prints one Warn
// line naming "KeyValue::Get" on slog's default logger when it is made,
// before any call.
func TestConfigNameMistakeIsLoggedWhenTheClientIsMade(t *testing.T) {
	log := &slogtest.Lines{Floor: slog.LevelWarn}
	prev := slog.Default()
	slog.SetDefault(log.Logger())
	defer slog.SetDefault(prev)
	c, err := New("client", WithServiceConfig(mustConfig(t, namesConfig)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	if got := log.Matching("service config names method"); len(got) != 0 {
		t.Fatalf("New logged %q before any Client", got)
	}
	if _, err := c.NewClient("kv", WithMethods("KeyValue::Get")); err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	got := log.Matching("service config names method")
	if len(got) != 1 || !strings.Contains(got[0], `name it "KeyValue::Get"`) {
		t.Fatalf("NewClient logged %q, want one warning naming \"KeyValue::Get\"", got)
	}
}
