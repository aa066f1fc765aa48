package channel

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/codes"
)

// A response whose arguments pass WithMaxResponseSize fails the call
// UNEXPECTED, naming the limit, without a retry; one of exactly the limit
// is read; the connection serves on.
func TestMaxResponseSize(t *testing.T) {
	const limit = 1 << 20
	srv, err := New("kv")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.RegisterRaw("big", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		n := len(req.Arg3) // the size asked for, as the body's length
		return &RawResponse{Arg3: bytes.Repeat([]byte("x"), n)}, nil
	})
	if err := srv.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	cfg := mustConfig(t, `{"methodConfig":[{"name":[{"service":"kv"}],"retryPolicy":{"maxAttempts":3,
	  "initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["UNEXPECTED"]}}]}`)
	c, err := New("client", WithMaxResponseSize(limit), WithServiceConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.AddPeer("kv", srv.HostPort()); err != nil {
		t.Fatal(err)
	}
	ask := func(n int) (*RawResponse, error) {
		return c.CallRaw(ctxTimeout(t), "kv", "big", nil, bytes.Repeat([]byte("."), n))
	}
	res, err := ask(limit)
	if err != nil || len(res.Arg3) != limit {
		t.Fatalf("a response of the limit: %v", err)
	}
	_, err = ask(limit + 1)
	var ce *CallError
	if !errors.As(err, &ce) || ce.Code != codes.Unexpected || ce.Attempts != 1 || !strings.Contains(err.Error(), "WithMaxResponseSize") {
		t.Fatalf("a response over the limit: %v, want UNEXPECTED after 1 attempt, naming WithMaxResponseSize", err)
	}
	if res, err := ask(10); err != nil || len(res.Arg3) != 10 {
		t.Fatalf("a call after the large response: %v", err)
	}
	if _, err := New("client", WithMaxResponseSize(0)); err == nil || !strings.Contains(err.Error(), "WithMaxResponseSize is 0") {
		t.Errorf("WithMaxResponseSize(0): %v", err)
	}
}
