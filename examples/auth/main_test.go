package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The call with the token is served; the one without is refused
// BAD_REQUEST by the server's middleware, and its handler never runs.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, nil, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	want := regexp.MustCompile(`^server: greeter on 127\.0\.0\.1:\d+, requiring the auth-token header
with the token: hello, alice
without the token: BAD_REQUEST: missing or wrong auth-token header
server: 1 call served, 1 refused
$`)
	if !want.MatchString(out.String()) {
		t.Errorf("output = %q, want a match for %q", out.String(), want)
	}
}

func TestRunRejectsArguments(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"extra"}, &out)
	if want := `auth takes no arguments, got ["extra"]`; err == nil || err.Error() != want {
		t.Errorf("run error = %v, want %q", err, want)
	}
}
