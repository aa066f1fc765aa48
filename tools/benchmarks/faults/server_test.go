package faults

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// callOnce calls method of the server at addr once, raw, and returns the
// error's code name ("" on success).
func callOnce(t *testing.T, addr, method string, timeout time.Duration) string {
	t.Helper()
	ch, err := channel.New("faults-test")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	cl, err := ch.NewClient(Service)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.AddPeer(addr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err = cl.CallRaw(ctx, method, nil, []byte("hi"))
	var ce *channel.CallError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ce):
		return ce.CodeName()
	}
	return err.Error()
}

func TestServerAnswersAndCounts(t *testing.T) {
	var accepts, execs events
	s, err := startServer(accepts.now, execs.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for method, want := range map[string]string{MethodEcho: "", MethodBusy: "BUSY", MethodDeclined: "DECLINED"} {
		if got := callOnce(t, s.HostPort(), method, testwait.Limit); got != want {
			t.Errorf("%s: %q, want %q", method, got, want)
		}
	}
	// Each callOnce is a new client, hence a new connection. A client
	// may retry a DECLINED once (today's transparent retry), so execs is
	// 3 or 4.
	testwait.Until(t, "3 accepts and 3-4 executions counted", func() bool {
		return accepts.count() == 3 && execs.count() >= 3
	})
	if n := execs.count(); n > 4 {
		t.Errorf("%d executions for 3 calls", n)
	}
}

func TestServerJSONMethods(t *testing.T) {
	var accepts, execs events
	s, err := startServer(accepts.now, execs.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ch, err := channel.New("faults-test")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	cl, err := ch.NewClient(Service)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.AddPeer(s.HostPort()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
	defer cancel()
	var out map[string]any
	if err := cl.CallJSON(ctx, MethodEcho+JSONSuffix, map[string]any{"k": "v"}, &out); err != nil || out["k"] != "v" {
		t.Errorf("echo.json: %v, %v; want the object back", out, err)
	}
	var ce *channel.CallError
	if err := cl.CallJSON(ctx, MethodBusy+JSONSuffix, map[string]any{}, &out); !errors.As(err, &ce) || ce.CodeName() != "BUSY" {
		t.Errorf("busy.json: %v, want BUSY", err)
	}
}

// An erroring server answers UNEXPECTED, raw and JSON, to the calls its
// erratic picks, in the order its handler runs them, and runs the handler
// for each.
func TestErroringServerAnswersUnexpected(t *testing.T) {
	var accepts, execs events
	errs := newErratic()
	s, err := startServer(accepts.now, execs.now, errs)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ch, err := channel.New("faults-test")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	cl, err := ch.NewClient(Service)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.AddPeer(s.HostPort()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
	defer cancel()
	code := func(err error) string {
		var ce *channel.CallError
		switch {
		case err == nil:
			return ""
		case errors.As(err, &ce):
			return ce.CodeName()
		}
		return err.Error()
	}
	// ErrorSeed's sequence: ok, ok, fail, ok, then seven failures, one
	// call at a time, raw and JSON alternately.
	want := []string{"", "", "UNEXPECTED", "", "UNEXPECTED", "UNEXPECTED", "UNEXPECTED", "UNEXPECTED", "UNEXPECTED", "UNEXPECTED", "UNEXPECTED", ""}
	for i, w := range want {
		var got string
		if i%2 == 0 {
			_, err := cl.CallRaw(ctx, MethodEcho, nil, []byte("hi"))
			got = code(err)
		} else {
			var out map[string]any
			got = code(cl.CallJSON(ctx, MethodEcho+JSONSuffix, map[string]any{"k": "v"}, &out))
		}
		if got != w {
			t.Fatalf("call %d: %q, want %q", i+1, got, w)
		}
	}
	streakAt, calls, failed := errs.state()
	if calls != len(want) || failed != 8 || execs.count() != len(want) {
		t.Errorf("%d calls decided, %d failed, %d executions; want %d, 8, %d", calls, failed, execs.count(), len(want), len(want))
	}
	if streakAt.IsZero() {
		t.Error("no streak noted after seven failures in a row")
	}
}
