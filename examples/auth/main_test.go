package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The call with the token is served; the one without is refused
// BAD_REQUEST by the server's middleware, and its handler never runs.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, nil, &out))
	assert.Regexp(t, regexp.MustCompile(`^server: greeter on 127\.0\.0\.1:\d+, requiring the auth-token header
with the token: hello, alice
without the token: BAD_REQUEST: missing or wrong auth-token header
server: 1 call served, 1 refused
$`), out.String())
}

func TestRunRejectsArguments(t *testing.T) {
	var out bytes.Buffer
	assert.EqualError(t, run(context.Background(), []string{"extra"}, &out), `auth takes no arguments, got ["extra"]`)
}
