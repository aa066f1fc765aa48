package channel

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/codes"
)

// CallJSON and CallRaw report a call's attempts and peers through
// ReportCallInfo, on success and on failure.
func TestReportCallInfo(t *testing.T) {
	f := startFleet(t, 3, busyFirst(2))
	c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", "")))
	var info CallInfo
	var out echoRes
	if err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, &out, ReportCallInfo(&info)); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}
	if info.Attempts != 3 {
		t.Errorf("info.Attempts = %v, want %v", info.Attempts, 3)
	}
	if len(info.Peers) != 3 {
		t.Fatalf("len(info.Peers) = %d, want %d", len(info.Peers), 3)
	}
	if info.Peer != out.Server {
		t.Errorf("the peer that answered: got %q, want %q", info.Peer, out.Server)
	}
	if info.Peer != info.Peers[2] {
		t.Errorf("info.Peer = %q, want %q", info.Peer, info.Peers[2])
	}

	s := startServer(t)
	s.busy.Store(true)
	c2, _, _ := startClient(t, s)
	info = CallInfo{Attempts: -1}
	_, err := to(c2, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil, ReportCallInfo(&info))
	if err == nil {
		t.Fatal("CallRaw succeeded, want an error")
	}
	if want := (CallInfo{Attempts: 1, Peer: s.ch.HostPort(), Peers: []string{s.ch.HostPort()}}); !reflect.DeepEqual(info, want) {
		t.Errorf("info = %+v, want %+v", info, want)
	}
}

// CallRaw and CallJSON run in recycled call states: what a call returned
// or reported must not change when later calls reuse its state. A
// CallInfo's and a CallError's Peers are the state's own slice, so those
// states are never recycled; a response's arguments are not the state's.
func TestRecycledCallStatesKeepResults(t *testing.T) {
	a, b := startServer(t), startServer(t)
	c, _, _ := startClient(t, a, b)
	ctx := ctxTimeout(t)

	res, err := to(c, "kv").CallRaw(ctx, "echo", []byte("h1"), []byte("first"))
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	var info CallInfo
	_, err = to(c, "kv").CallRaw(ctx, "echo", nil, []byte("x"), ReportCallInfo(&info))
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	infoPeers := append([]string(nil), info.Peers...)
	if len(infoPeers) != 1 {
		t.Fatalf("len(infoPeers) = %d, want %d", len(infoPeers), 1)
	}
	if want := []string{a.ch.HostPort(), b.ch.HostPort()}; !slices.Contains(want, infoPeers[0]) {
		t.Errorf("infoPeers[0] = %q, want one of %q", infoPeers[0], want)
	}
	a.busy.Store(true)
	b.busy.Store(true)
	_, failed := to(c, "kv").CallRaw(ctx, "echo", nil, []byte("busy"))
	var ce *CallError
	if !errors.As(failed, &ce) {
		t.Fatalf("CallRaw error = %v, want a %T", failed, ce)
	}
	errPeers := append([]string(nil), ce.Peers...)
	if len(errPeers) != 1 {
		t.Fatalf("len(errPeers) = %d, want %d", len(errPeers), 1)
	}
	if want := []string{a.ch.HostPort(), b.ch.HostPort()}; !slices.Contains(want, errPeers[0]) {
		t.Errorf("errPeers[0] = %q, want one of %q", errPeers[0], want)
	}
	a.busy.Store(false)
	b.busy.Store(false)

	var out echoRes
	for i := 0; i < 50; i++ { // reuse the states, on both peers
		_, err := to(c, "kv").CallRaw(ctx, "echo", []byte("h2"), []byte(fmt.Sprint("later ", i)))
		if err != nil {
			t.Fatalf("CallRaw: %v", err)
		}
		if err := to(c, "kv").CallJSON(ctx, "get", &echoReq{Key: fmt.Sprint(i)}, &out); err != nil {
			t.Fatalf("CallJSON: %v", err)
		}
		if want := fmt.Sprint(i); out.Key != want {
			t.Fatalf("out.Key = %q, want %q", out.Key, want)
		}
	}
	if string(res.Arg2) != "h1" {
		t.Errorf("string(res.Arg2) = %q, want %q", string(res.Arg2), "h1")
	}
	if string(res.Arg3) != "first" {
		t.Errorf("string(res.Arg3) = %q, want %q", string(res.Arg3), "first")
	}
	if !reflect.DeepEqual(info.Peers, infoPeers) {
		t.Errorf("info.Peers = %q, want %q", info.Peers, infoPeers)
	}
	if !reflect.DeepEqual(ce.Peers, errPeers) {
		t.Errorf("ce.Peers = %q, want %q", ce.Peers, errPeers)
	}
}

// Every failure has a code, local ones included: a request that cannot be
// encoded is BAD_REQUEST, a call on a closed channel CLOSED; neither sends
// anything.
func TestEveryFailureHasACode(t *testing.T) {
	s := startServer(t)
	c, _, _ := startClient(t, s)
	var info CallInfo
	err := to(c, "kv").CallJSON(ctxTimeout(t), "get", map[string]any{"f": func() {}}, nil, ReportCallInfo(&info))
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("CallJSON error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.BadRequest {
		t.Errorf("ce.Code = %v, want %v", ce.Code, codes.BadRequest)
	}
	if want := "cannot encode the request as JSON"; !strings.Contains(ce.Error(), want) {
		t.Errorf("ce.Error() = %q, want it to contain %q", ce.Error(), want)
	}
	if info.Attempts != 0 {
		t.Errorf("info.Attempts = %v, want 0", info.Attempts)
	}

	c.Close()
	_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	if !errors.As(err, &ce) {
		t.Fatalf("CallRaw error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.Closed {
		t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Closed)
	}
	if !ce.Code.IsLocal() {
		t.Error("ce.Code.IsLocal() = false, want true")
	}
	if !errors.Is(err, ErrClosed) {
		t.Errorf("CallRaw error = %v, want %v", err, ErrClosed)
	}
	if got := ce.CodeName(); got != "CLOSED" {
		t.Errorf("ce.CodeName() = %q, want %q", got, "CLOSED")
	}
	if got := s.received.Load(); got != 0 {
		t.Errorf("s.received.Load() = %v, want 0", got)
	}
}
